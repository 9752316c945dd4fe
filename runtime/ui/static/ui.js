// memir inspector: the one script. The time slider shows the date of the decision under the thumb
// while it moves, and loads that state when it is let go. Everything else is plain links and forms.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const slider = document.getElementById("when");
  if (!slider) return;
  const label = document.getElementById("when-label");
  const dates = JSON.parse(slider.dataset.dates || "[]");
  const show = () => { label.textContent = dates[Number(slider.value)] || ""; };
  slider.addEventListener("input", show);
  slider.addEventListener("change", () => { slider.form.submit(); });
  show();
});
