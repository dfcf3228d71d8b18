// Keyboard and screen-reader help for every page: where focus goes after an htmx swap, what is
// said about it, and Space on links that look like buttons. No inline handlers: the CSP forbids them.
//
// A fragment swapped in by htmx opts in with attributes, on its root or on any element inside it:
//   data-autofocus   focus moves here after the swap, when the swap took the focus away (the link
//                    or button that had it was replaced). Elements that cannot take focus, such as
//                    headings, get tabindex="-1". On a full page load nothing moves.
//   data-announce    read out by the page's live region (#announcer in base.html, present from the
//                    start and never swapped, which is why screen readers hear it). With a value,
//                    the value is said; bare (data-announce), the element's own text is.
// A response can also announce through a header: HX-Trigger: {"ringlab:announce": "Saved."}.
// Both work for outerHTML and innerHTML swaps; a fragment that polls must not carry data-autofocus.
(function () {
  "use strict";
  const ANNOUNCE_EVENT = "ringlab:announce";
  let timer = null;

  function announce(text) {
    const region = document.getElementById("announcer");
    const words = (text || "").replace(/\s+/g, " ").trim();
    if (!region || !words) return;
    // Emptied, then filled a moment later: the same words twice in a row are read twice.
    region.textContent = "";
    clearTimeout(timer);
    timer = setTimeout(function () { region.textContent = words; }, 50);
  }

  function find(root, selector) {
    return root.matches(selector) ? root : root.querySelector(selector);
  }

  function focusLost() {
    const active = document.activeElement;
    return !active || active === document.body || !active.isConnected;
  }

  function moveFocus(root) {
    const target = find(root, "[data-autofocus]");
    if (!(target instanceof HTMLElement) || target.closest("[hidden]") || !focusLost()) return;
    if (!target.hasAttribute("tabindex") && target.tabIndex < 0) target.setAttribute("tabindex", "-1");
    target.focus();
  }

  document.addEventListener("htmx:afterSettle", function (event) {
    const root = event.target;
    if (!(root instanceof Element) || !root.isConnected) return;
    moveFocus(root);
    const source = find(root, "[data-announce]");
    if (source) announce(source.getAttribute("data-announce") || source.textContent);
  });

  document.addEventListener(ANNOUNCE_EVENT, function (event) {
    const detail = event.detail;
    announce(typeof detail === "string" ? detail : detail && detail.value);
  });

  // A link with role="button" says "button", so it must do what a button does with Space
  // (a link only answers Enter). Held down, Space does not repeat the click, as with a button.
  document.addEventListener("keydown", function (event) {
    if (event.key !== " " || event.defaultPrevented || event.repeat) return;
    if (event.ctrlKey || event.metaKey || event.altKey || event.shiftKey) return;
    const link = event.target;
    if (!(link instanceof HTMLAnchorElement) || link.getAttribute("role") !== "button") return;
    event.preventDefault();
    link.click();
  });
})();
