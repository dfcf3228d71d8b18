// Quiz attempt countdown. The server sends the seconds left (its own clock decides the
// deadline); counting from that, not from the browser's clock, makes a skewed clock harmless.
// The clock is never a live region (it would speak every second). The page's announcer
// (#announcer in base.html, through static/js/a11y.js) says the time left at the marks the server
// chose (data-announce-at, seconds left: see app/quizzes/countdown.py), when the written warning
// appears (data-warn-at), when asked (the "Say the time left" button) and at zero. When time is
// up it says so, then the page reloads: the server submits the attempt and shows the result.
(function () {
  "use strict";
  var MOVE_ON_MS = 3000; // the time-up message stays this long before the result opens
  var ANNOUNCE = "ringlab:announce"; // static/js/a11y.js says the event's words in #announcer

  function format(seconds) {
    var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    var mm = (h && m < 10 ? "0" : "") + m, ss = (s < 10 ? "0" : "") + s;
    return (h ? h + ":" : "") + mm + ":" + ss;
  }

  // Durations as a person says them, as app/quizzes/countdown.py's words() does.
  function plural(n, unit) { return n + " " + unit + (n === 1 ? "" : "s"); }
  function words(seconds) {
    if (seconds < 60) return plural(seconds, "second");
    var hours = Math.floor(seconds / 3600), minutes = Math.floor((seconds % 3600) / 60);
    var parts = hours ? [plural(hours, "hour")] : [];
    if (minutes || !hours) parts.push(plural(minutes, "minute"));
    return parts.join(" ");
  }
  // To the second within the last hour ("12 minutes 5 seconds"), for a time asked for.
  function exact(seconds) {
    var rest = seconds % 60;
    return words(seconds) + (seconds >= 60 && seconds < 3600 && rest ? " " + plural(rest, "second") : "");
  }

  function say(text) {
    document.dispatchEvent(new CustomEvent(ANNOUNCE, { detail: text }));
  }

  function start(el) {
    if (el.dataset.countdownStarted) return;
    el.dataset.countdownStarted = "1";
    var value = el.querySelector("[data-countdown-value]");
    var warning = el.querySelector("[data-countdown-warning]");
    var ask = el.querySelector("[data-countdown-ask]");
    var marks = (el.dataset.announceAt || "").split(" ").filter(Boolean).map(Number);
    var warnAt = Number(el.dataset.warnAt || 0);
    var saved = "Your answers are saved; the attempt will be submitted automatically at " + el.dataset.deadline + ".";
    var end = performance.now() + Number(el.dataset.secondsLeft) * 1000;
    var timer = null, last = null, left = null;

    // What to say as the clock goes from ``before`` to ``now`` seconds left ("" for nothing).
    function news(before, now) {
      var crossed = marks.filter(function (m) { return m < before && m >= now; });
      var text = "";
      if (crossed.length) {
        var mark = Math.min.apply(null, crossed);
        // After a sleeping laptop wakes, a mark long past would be wrong: say the real time.
        text = (mark - now <= 5 ? words(mark) : exact(now)) + " left.";
      }
      if (warnAt && before > warnAt && now <= warnAt) text = (text || exact(now) + " left.") + " " + saved;
      return text;
    }

    function tick() {
      left = Math.max(0, Math.ceil((end - performance.now()) / 1000));
      value.textContent = format(left);
      el.classList.toggle("is-low", left <= warnAt);
      if (warning && left <= warnAt) warning.hidden = false;
      var text = last === null ? "" : news(last, left);
      last = left;
      if (left === 0) {
        clearInterval(timer);
        el.classList.add("is-up");
        value.textContent = "Time is up";
        if (warning) {
          warning.textContent = "Time is up. Your attempt has been submitted with the answers you saved; your result opens in a moment.";
          warning.hidden = false;
        }
        say("Time is up. Your attempt was submitted automatically with the answers you saved. Opening your result.");
        // Long enough to hear that, and for the server's clock to pass the deadline too.
        setTimeout(function () { window.location.assign(el.dataset.expiredUrl); }, MOVE_ON_MS);
      } else if (text) {
        say(text);
      }
    }

    if (ask) {
      ask.hidden = false;
      ask.addEventListener("click", function () {
        say(left === 0 ? "Time is up." : exact(left) + " left. " + saved);
      });
    }
    tick();
    timer = setInterval(tick, 250);
  }

  function init() {
    document.querySelectorAll("[data-countdown]").forEach(start);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
