// Flashcard review keys, as in Anki: Space/Enter show the answer (and then mean Good),
// 1-5 rate, U or Ctrl+Z undo, - bury, @ suspend. No inline handlers: the CSP forbids them.
// A focused control keeps Space and Enter for itself (Space on "1 Again" records Again), and a
// student can turn the one-key shortcuts off in the study settings (the reviewer then says
// data-shortcuts="off"); Ctrl+Z stays. Focus after a rating is static/js/a11y.js's (data-autofocus).
(function () {
  "use strict";
  // What answers Space and Enter itself when it has focus.
  const CONTROLS = "a[href], button, input, select, textarea, summary, [role=button], [role=link], [contenteditable]";
  let shownAt = performance.now();
  let busy = false;

  function reviewer() { return document.getElementById("reviewer"); }

  function reveal(root) {
    const answer = root.querySelector(".answer");
    const ratings = root.querySelector(".ratings");
    if (!answer || !ratings) return;
    answer.hidden = false;
    ratings.hidden = false;
    root.dataset.side = "back";
    const button = root.querySelector("[data-reveal]");
    if (button) button.hidden = true;
    // The button that had focus is gone: the answer takes it, read out, with the ratings one Tab on.
    answer.focus();
  }

  // While a request is out, and until htmx has settled the new card (its buttons are live then),
  // keys are not sent: a click before that would submit the form natively. The reviewer swaps
  // with settle:0, so the card settles in the same task it appears in and no key meant for it is
  // lost. Undo pressed during a request is remembered and sent once the card has settled; other
  // keys are dropped, as they were meant for the card that is going away.
  let pendingUndo = false;

  function press(root, selector) {
    if (busy) {
      if (selector === "[data-undo]") pendingUndo = true;
      return;
    }
    const button = root.querySelector(selector);
    if (button) button.click();
  }

  document.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    if (target.closest("[data-reveal]")) {
      const root = reviewer();
      if (root) reveal(root);
      return;
    }
    if (target.closest("[data-rate]")) {
      const root = reviewer();
      const field = root && root.querySelector("[data-duration]");
      if (field) field.value = String(Math.round(performance.now() - shownAt));
    }
  }, true);

  document.addEventListener("keydown", function (event) {
    const root = reviewer();
    if (!root) return;
    // A held key repeats: Space held on the front would show the answer, then rate it Good.
    if (event.defaultPrevented || event.repeat) return;
    const target = event.target instanceof Element ? event.target : null;
    if (target && target.closest("input, textarea, select, [contenteditable]")) return;
    const key = event.key;
    if ((event.ctrlKey || event.metaKey) && key.toLowerCase() === "z") {
      event.preventDefault();
      press(root, "[data-undo]");
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (root.dataset.shortcuts === "off") return;
    const front = root.dataset.side !== "back";
    if (key === " " || key === "Enter") {
      if (target && target.closest(CONTROLS)) return;
      event.preventDefault();
      if (front) reveal(root); else press(root, '[data-rate="4"]');
    } else if (/^[1-5]$/.test(key)) {
      if (!front) press(root, '[data-rate="' + key + '"]');
    } else if (key === "u" || key === "U") {
      press(root, "[data-undo]");
    } else if (key === "-") {
      press(root, "[data-bury]");
    } else if (key === "@") {
      press(root, "[data-suspend]");
    }
  });

  document.addEventListener("htmx:beforeRequest", function () { busy = true; });
  document.addEventListener("htmx:afterRequest", function (event) {
    // Nothing is swapped after a failed request, so nothing will settle: free the keys now.
    if (!event.detail.successful) busy = false;
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    const target = event.target;
    if (target instanceof HTMLElement && target.id === "reviewer") shownAt = performance.now();
  });
  // The swapped-in #reviewer replaces the target itself (outerHTML); reset the clock there too.
  document.addEventListener("htmx:afterSettle", function () {
    busy = false;
    const root = reviewer();
    if (root && root.dataset.side !== "back") shownAt = performance.now();
    if (root && pendingUndo) {
      pendingUndo = false;
      press(root, "[data-undo]");
    }
  });
})();
