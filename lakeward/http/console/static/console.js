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

  // A visual's form shows only the fields its chart type draws; hidden ones are
  // disabled, so they are not sent either.
  function showTypeFields(form) {
    const type = form.querySelector('select[name="type"]').value;
    form.querySelectorAll("[data-types]").forEach(function (element) {
      const shown = element.dataset.types.split(" ").includes(type);
      element.hidden = !shown;
      element.querySelectorAll("input, select").forEach(function (input) { input.disabled = !shown; });
    });
  }
  document.querySelectorAll(".visual-form").forEach(function (form) {
    showTypeFields(form);
    form.querySelector('select[name="type"]').addEventListener("change", function () { showTypeFields(form); });
  });

  // A field button adds its field to the list beside it, or takes it out if it is there.
  document.addEventListener("click", function (event) {
    const chip = event.target.closest(".field-list .chip");
    if (!chip) { return; }
    const input = chip.closest(".field-list").querySelector("input");
    const names = input.value.split(",").map(function (n) { return n.trim(); }).filter(Boolean);
    const at = names.indexOf(chip.dataset.field);
    if (at >= 0) { names.splice(at, 1); } else { names.push(chip.dataset.field); }
    input.value = names.join(", ");
  });

  // A field the browser refuses says in plain words what it takes (its title), not
  // "Please match the requested format."
  function explain(input) {
    input.setCustomValidity("");
    if (input.title && (input.validity.patternMismatch || input.validity.valueMissing)) {
      input.setCustomValidity(input.title);
    }
  }
  document.querySelectorAll("input[pattern][title], input[required][title]").forEach(function (input) {
    input.addEventListener("input", function () { explain(input); });
    input.addEventListener("invalid", function () { explain(input); });
    explain(input);
  });

  return { csrf: csrf, call: call };
})();
