/* diff.html: filter the change rows by words and by section; the filter lives in the URL
   (#?q=..&s=..) so a filtered view can be linked. Text is only read, never inserted as HTML. */
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.drow"));
  rows.forEach(function (tr) { tr.dataset.text = tr.textContent.toLowerCase(); });

  function apply() {
    var words = $("d-q").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    var section = $("d-s").value, shown = 0;
    document.querySelectorAll("section.dsec").forEach(function (sec) {
      var inSection = !section || sec.id === section, any = false;
      sec.querySelectorAll("details.grp").forEach(function (grp) {
        var visible = 0;
        grp.querySelectorAll("tr.drow").forEach(function (tr) {
          var ok = inSection && words.every(function (w) { return tr.dataset.text.indexOf(w) >= 0; });
          tr.hidden = !ok; visible += ok ? 1 : 0;
        });
        grp.hidden = visible === 0;
        if (words.length && visible) grp.open = true;
        any = any || visible > 0; shown += visible;
      });
      sec.hidden = !inSection || (words.length > 0 && !any);
    });
    $("d-count").textContent = "showing " + shown + " of " + rows.length + " changed cases";
    var params = new URLSearchParams();
    if ($("d-q").value.trim()) params.set("q", $("d-q").value.trim());
    if (section) params.set("s", section);
    var query = params.toString();
    history.replaceState(null, "", query ? "#?" + query : location.pathname + location.search);
  }

  function fromHash() {
    if (location.hash.indexOf("#?") !== 0) return false;
    var p = new URLSearchParams(location.hash.slice(2));
    $("d-q").value = p.get("q") || ""; $("d-s").value = p.get("s") || "";
    return true;
  }

  var timer = null;
  $("d-form").addEventListener("submit", function (e) { e.preventDefault(); });
  $("d-q").addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(apply, 120); });
  $("d-s").addEventListener("change", apply);
  $("d-reset").addEventListener("click", function () { $("d-q").value = ""; $("d-s").value = ""; apply(); });
  window.addEventListener("hashchange", function () { if (fromHash()) apply(); });
  if (fromHash()) apply(); else $("d-count").textContent = rows.length + " changed cases";
})();
