// Quiz attempt countdown. The server sends the seconds left (its own clock decides the
// deadline); counting from that, not from the browser's clock, makes a skewed clock harmless.
// When time is up, the page reloads: the server submits the attempt and shows the result.
(function () {
  "use strict";
  var LOW_SECONDS = 300;

  function format(seconds) {
    var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    var mm = (h && m < 10 ? "0" : "") + m, ss = (s < 10 ? "0" : "") + s;
    return (h ? h + ":" : "") + mm + ":" + ss;
  }

  function start(el) {
    if (el.dataset.countdownStarted) return;
    el.dataset.countdownStarted = "1";
    var value = el.querySelector("[data-countdown-value]");
    var end = performance.now() + Number(el.dataset.secondsLeft) * 1000;
    var timer = null;
    function tick() {
      var left = Math.max(0, Math.ceil((end - performance.now()) / 1000));
      value.textContent = format(left);
      el.classList.toggle("is-low", left <= LOW_SECONDS);
      if (left === 0) {
        clearInterval(timer);
        el.classList.add("is-up");
        value.textContent = "Time is up";
        // A moment's grace so the server's clock has passed the deadline too.
        setTimeout(function () { window.location.assign(el.dataset.expiredUrl); }, 1000);
      }
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
