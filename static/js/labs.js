// Lab editor: Tab indents, an uploaded .py file is loaded into the editor. No inline scripts (CSP).
(function () {
  "use strict";
  function setup(root) {
    root.querySelectorAll("[data-lab-editor]").forEach(function (area) {
      if (area.dataset.labReady) return;
      area.dataset.labReady = "1";
      area.addEventListener("keydown", function (event) {
        if (event.key !== "Tab" || event.shiftKey || event.ctrlKey || event.metaKey || event.altKey) return;
        event.preventDefault();
        var start = area.selectionStart, end = area.selectionEnd;
        area.setRangeText("    ", start, end, "end");
      });
    });
    root.querySelectorAll("[data-lab-upload]").forEach(function (input) {
      if (input.dataset.labReady) return;
      input.dataset.labReady = "1";
      input.addEventListener("change", function () {
        var file = input.files && input.files[0];
        var area = input.form && input.form.querySelector("[data-lab-editor]");
        if (!file || !area) return;
        file.text().then(function (text) {
          area.value = text;
          input.value = ""; // the editor now holds the code: send it once, as text
        });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { setup(document); });
  document.addEventListener("htmx:load", function (event) { setup(event.target); });
})();
