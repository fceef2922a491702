// Packyard's web UI works without scripts; this adds copy buttons to the snippets and, on the
// forms that create a repository or a cleanup policy, shows only the blocks the chosen format
// (and repository type) use.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const format = document.getElementById("format");
  const type = document.getElementById("type");
  if (format && format.tagName === "SELECT") {
    const fit = () => {
      for (const block of document.querySelectorAll("[data-formats], [data-types]")) {
        const formats = block.dataset.formats ? block.dataset.formats.split(" ") : null;
        const types = block.dataset.types && type ? block.dataset.types.split(" ") : null;
        block.hidden = (formats && !formats.includes(format.value)) || (types && !types.includes(type.value));
      }
      // What is hidden is not sent: a field of another format or type must not ride along.
      const fields = ["input", "select", "textarea"].flatMap(f => [`[data-formats] ${f}`, `[data-types] ${f}`]).join(", ");
      for (const input of document.querySelectorAll(fields)) {
        input.disabled = input.closest("[hidden]") !== null;
      }
    };
    format.addEventListener("change", fit);
    if (type) type.addEventListener("change", fit);
    fit();
  }
  for (const button of document.querySelectorAll("button.copy[data-copy]")) {
    button.hidden = false;
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(button.dataset.copy);
        button.textContent = "Copied";
      } catch (_) {
        button.textContent = "Select and copy";
      }
      setTimeout(() => { button.textContent = "Copy"; }, 2000);
    });
  }
});
