/* Heatmaps: hovering a cell of any picture of a slice shows that element's row and column,
   expected and actual values and its share of the tolerance. The values come from the figure's
   data-cells attribute (base64 float32, little-endian); nothing is inserted as HTML. */
(function () {
  "use strict";
  function floats(b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }
  function fmt(v) {
    if (isNaN(v)) return "NaN";
    if (!isFinite(v)) return v > 0 ? "+inf" : "-inf";
    if (Math.abs(v) >= 3.0e38) return (v > 0 ? "+" : "-") + "FLT_MAX (" + v.toExponential(6) + ")";
    return String(Number(v.toPrecision(7)));
  }
  function share(v) {
    if (!isFinite(v)) return "NaN/inf mismatch";
    if (v === 0) return "exact";
    return (v > 1 ? "OUTSIDE: " : "") + Number(v.toPrecision(3)) + "× its tolerance";
  }
  document.querySelectorAll("figure.slice[data-cells]").forEach(function (fig) {
    var data;
    try { data = JSON.parse(fig.getAttribute("data-cells")); } catch (e) { return; }
    var e = floats(data.e), a = floats(data.a), s = floats(data.s), tip = fig.querySelector(".tip");
    fig.querySelectorAll("img.heat").forEach(function (img) {
      img.addEventListener("mousemove", function (ev) {
        var r = img.getBoundingClientRect();
        var x = Math.min(data.w - 1, Math.floor((ev.clientX - r.left) / r.width * data.w));
        var y = Math.min(data.h - 1, Math.floor((ev.clientY - r.top) / r.height * data.h));
        var i = y * data.w + x;
        tip.textContent = "row " + y + ", col " + x + ":  expected " + fmt(e[i]) + "  actual " + fmt(a[i]) +
          "  |diff| " + fmt(Math.abs(a[i] - e[i])) + "  " + share(s[i]);
        tip.hidden = false;
      });
      img.addEventListener("mouseleave", function () { tip.hidden = true; });
    });
  });
})();
