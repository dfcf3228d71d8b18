// /api/docs: Swagger UI over the app's own OpenAPI document. A file, not an inline script: the CSP
// allows only the app's own scripts.
(function () {
  "use strict";
  const root = document.getElementById("swagger-ui");
  if (!root || typeof window.SwaggerUIBundle !== "function") return;
  window.SwaggerUIBundle({ url: root.dataset.specUrl, domNode: root, deepLinking: true, validatorUrl: null });
})();
