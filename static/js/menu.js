// The site menu on a phone: collapsed behind a "Menu" button. Loaded in <head> (not deferred) so
// the menu starts collapsed without a flash; without JavaScript the menu simply stays open.
(function () {
  "use strict";
  document.documentElement.classList.add("menu-js");
  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    var button = target && target.closest("[data-menu-toggle]");
    if (!button) return;
    var header = button.closest(".site-header");
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", open ? "true" : "false");
    if (header) header.classList.toggle("menu-open", open);
  });
})();
