// The copy button beside a secret shown once (a new or rotated client key). The Clipboard API needs
// a secure context (HTTPS or loopback); elsewhere the text is selected and copied the old way.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.copy-key");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  const done = button.parentElement.querySelector(".copy-done");
  let copied = false;
  try {
    await navigator.clipboard.writeText(field.value);
    copied = true;
  } catch (_) {
    field.focus();
    field.select();
    copied = document.execCommand("copy");
  }
  if (done) done.textContent = copied ? "Copied" : "Select the text and copy it";
});
