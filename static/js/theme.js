// Light/dark theme: follows the system until the user picks one, then remembers it.
// Loaded in <head> (not deferred) so the page never flashes the wrong theme.
(function () {
  var KEY = "ringlab-theme";
  var root = document.documentElement;
  var saved = null;
  try { saved = localStorage.getItem(KEY); } catch (e) { /* private mode */ }
  if (saved === "light" || saved === "dark") root.setAttribute("data-theme", saved);
  var system = window.matchMedia("(prefers-color-scheme: dark)");

  function current() {
    var set = root.getAttribute("data-theme");
    if (set) return set;
    return system.matches ? "dark" : "light";
  }

  // The toggle is a pressed/not pressed button named "Dark theme": a screen reader hears which theme is on.
  function showState() {
    var dark = current() === "dark" ? "true" : "false";
    var buttons = document.querySelectorAll("[data-theme-toggle]");
    for (var i = 0; i < buttons.length; i++) buttons[i].setAttribute("aria-pressed", dark);
  }
  document.addEventListener("DOMContentLoaded", showState);
  // Until the user picks a theme, the page follows the system's, which can change while it is open.
  if (system.addEventListener) system.addEventListener("change", showState);

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-theme-toggle]");
    if (!button) return;
    var next = current() === "dark" ? "light" : "dark";
    root.setAttribute("data-theme", next);
    try { localStorage.setItem(KEY, next); } catch (e) { /* private mode */ }
    showState();
  });
})();
