// Sign-up: preselect the browser's time zone (Intl) in the list, so a new account gets it without
// typing. The student can still choose another; a form sent back with an error keeps their choice.
(function () {
  "use strict";
  const select = document.querySelector("select[data-browser-zone]:not([data-chosen])");
  if (!select) return;
  let zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return; }
  const option = Array.from(select.options).find(function (o) { return o.value === zone; });
  if (option) select.value = zone;
})();
