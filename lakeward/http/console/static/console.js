// Shared by every console page: JSON calls that carry the CSRF token, and confirmations.
"use strict";
window.lakeward = (function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;

  async function call(method, url, body) {
    const options = { method: method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
    if (method !== "GET") {
      options.headers["X-CSRF-Token"] = csrf;
    }
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const response = await fetch(url, options);
    const data = await response.json().catch(function () { return {}; });
    if (!response.ok) {
      const message = data.error ? data.error.message
        : data.detail ? JSON.stringify(data.detail) : response.statusText;
      throw new Error(message);
    }
    return data;
  }

  // Buttons and forms with data-confirm ask first (approve, reject, detach, delete).
  document.addEventListener("click", function (event) {
    const target = event.target.closest("[data-confirm]");
    if (target && !window.confirm(target.dataset.confirm)) {
      event.preventDefault();
    }
  });

  return { csrf: csrf, call: call };
})();
