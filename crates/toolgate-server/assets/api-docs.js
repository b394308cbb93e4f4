// The API reference page: Swagger UI (vendored, served beside this script)
// on the server's OpenAPI document. A file of its own, because the page's
// Content-Security-Policy runs scripts from this server only, none inline.
"use strict";

window.ui = SwaggerUIBundle({
  // Beside the page, wherever the server is mounted.
  url: new URL("openapi.json", document.baseURI).href,
  dom_id: "#swagger-ui",
  deepLinking: true,
  // Shows the error codes each response lists (`x-error-codes`).
  showExtensions: true,
  // Never send the document to an outside validator.
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
