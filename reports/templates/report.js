/* Case table of report.html: filter, sort and deep links (#cases?outcome=fail&op=..), no server.
   Text from results (ids, messages, tags) is only ever inserted with textContent. */
(function () {
  "use strict";
  var ROWS = JSON.parse(document.getElementById("case-data").textContent);
  var ORDER = JSON.parse(document.getElementById("outcome-order").textContent);
  var COL = { id: 0, op: 1, dtype: 2, outcome: 3, max_abs: 4, max_rel: 5, max_ulp: 6, duration: 7, anchor: 8, message: 9, tags: 10 };
  var PAGE = 500;
  var state = { q: "", outcome: "", op: "", dtype: "", tag: "", sort: "outcome", dir: 1, limit: PAGE };
  var $ = function (id) { return document.getElementById(id); };
  var tbody = document.querySelector("#case-table tbody");
  var rank = {};
  ORDER.forEach(function (o, i) { rank[o] = i; });

  var SPECIAL = { "NaN": Infinity, "Inf": Infinity, "-Inf": Infinity };  // non-finite errors sort as the worst
  ROWS.forEach(function (r) {
    [COL.max_abs, COL.max_rel, COL.max_ulp].forEach(function (c) {
      if (typeof r[c] === "string") { r.shown = r.shown || {}; r.shown[c] = r[c]; r[c] = SPECIAL[r[c]] !== undefined ? SPECIAL[r[c]] : null; }
    });
    var t = r[COL.tags] || {};
    r.search = [r[COL.id], r[COL.op], r[COL.dtype], r[COL.outcome], r[COL.message]]
      .concat(Object.keys(t).map(function (k) { return k + "=" + t[k]; })).join(" ").toLowerCase();
  });

  function fillSelect(sel, col) {
    var seen = {};
    ROWS.forEach(function (r) { seen[r[col]] = true; });
    var values = Object.keys(seen);
    values.sort(col === COL.outcome ? function (a, b) { return (rank[a] !== undefined ? rank[a] : -1) - (rank[b] !== undefined ? rank[b] : -1); } : undefined);
    values.forEach(function (v) {
      var o = document.createElement("option");
      o.value = v; o.textContent = v;
      sel.appendChild(o);
    });
  }
  fillSelect($("f-outcome"), COL.outcome);
  fillSelect($("f-op"), COL.op);
  fillSelect($("f-dtype"), COL.dtype);

  function fmt(v) {
    if (v === null || v === undefined) return "—";
    if (typeof v !== "number") return String(v);
    if (v === 0) return "0";
    var a = Math.abs(v);
    return (a >= 1e-3 && a < 1e6) ? String(Number(v.toPrecision(4))) : v.toExponential(2);
  }

  function matches(r) {
    if (state.outcome && r[COL.outcome] !== state.outcome) return false;
    if (state.op && r[COL.op] !== state.op) return false;
    if (state.dtype && r[COL.dtype] !== state.dtype) return false;
    if (state.tag) {
      var eq = state.tag.indexOf("=");
      var tags = r[COL.tags] || {};
      if (eq < 0 || tags[state.tag.slice(0, eq)] !== state.tag.slice(eq + 1)) return false;
    }
    if (state.q) {
      var words = state.q.toLowerCase().split(/\s+/);
      for (var i = 0; i < words.length; i++) if (words[i] && r.search.indexOf(words[i]) < 0) return false;
    }
    return true;
  }

  function compare(a, b) {
    var k = state.sort, d = state.dir, x, y;
    if (k === "outcome") {
      x = rank[a[COL.outcome]]; y = rank[b[COL.outcome]];
      x = x === undefined ? -1 : x; y = y === undefined ? -1 : y;
      if (x !== y) return d * (x - y);
      return (b[COL.max_abs] || 0) - (a[COL.max_abs] || 0) || (a[COL.id] < b[COL.id] ? -1 : 1);
    }
    x = a[COL[k]]; y = b[COL[k]];
    if (x === null || x === undefined) return (y === null || y === undefined) ? 0 : 1;  // missing last
    if (y === null || y === undefined) return -1;
    if (x < y) return -d;
    if (x > y) return d;
    return 0;
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function render() {
    var shown = ROWS.filter(matches).sort(compare);
    var frag = document.createDocumentFragment();
    shown.slice(0, state.limit).forEach(function (r) {
      var tr = document.createElement("tr");
      tr.className = "row";
      var td = cell(tr, "", "");
      var b = document.createElement("span");
      b.className = "badge o-" + r[COL.outcome];
      b.textContent = r[COL.outcome];
      td.appendChild(b);
      var idCell = cell(tr, "", "id");
      if (r[COL.anchor]) {
        var a = document.createElement("a");
        a.href = "#" + r[COL.anchor];
        a.textContent = r[COL.id];
        a.title = "show the details of this case";
        idCell.appendChild(a);
      } else {
        idCell.textContent = r[COL.id];
      }
      cell(tr, r[COL.op]); cell(tr, r[COL.dtype]);
      [COL.max_abs, COL.max_rel, COL.max_ulp].forEach(function (c) {
        cell(tr, r.shown && r.shown[c] !== undefined ? r.shown[c] : fmt(r[c]), "num");
      });
      cell(tr, typeof r[COL.duration] === "number" ? r[COL.duration].toFixed(3) : "—", "num");
      cell(tr, r[COL.message], "msg").title = r[COL.message];
      frag.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(frag);
    $("f-count").textContent = "showing " + Math.min(shown.length, state.limit) + " of " + shown.length +
      " matching (" + ROWS.length + " cases)";
    var more = $("f-more");
    more.hidden = shown.length <= state.limit;
    more.textContent = "Show all " + shown.length + " matching cases";
    document.querySelectorAll("#case-table th[data-sort]").forEach(function (th) {
      if (th.getAttribute("data-sort") === state.sort) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    $("f-tag").hidden = !state.tag;
    $("f-tag-text").textContent = state.tag;
  }

  function syncControls() {
    $("f-q").value = state.q; $("f-outcome").value = state.outcome;
    $("f-op").value = state.op; $("f-dtype").value = state.dtype;
  }

  $("f-form").addEventListener("submit", function (e) { e.preventDefault(); });
  var timer = null;
  $("f-q").addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { state.q = $("f-q").value.trim(); state.limit = PAGE; render(); }, 120);
  });
  ["outcome", "op", "dtype"].forEach(function (k) {
    $("f-" + k).addEventListener("change", function () { state[k] = $("f-" + k).value; state.limit = PAGE; render(); });
  });
  $("f-tag-clear").addEventListener("click", function () { state.tag = ""; render(); });
  $("f-reset").addEventListener("click", function () {
    state.q = state.outcome = state.op = state.dtype = state.tag = ""; state.limit = PAGE;
    syncControls(); render();
  });
  $("f-more").addEventListener("click", function () { state.limit = ROWS.length; render(); });
  document.querySelectorAll("#case-table th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var k = th.getAttribute("data-sort");
      if (state.sort === k) state.dir = -state.dir;
      else { state.sort = k; state.dir = (k.indexOf("max_") === 0 || k === "duration") ? -1 : 1; }
      render();
    });
  });

  function applyHash() {
    var h = location.hash;
    if (h.indexOf("#cases?") !== 0) return;
    var p = new URLSearchParams(h.slice("#cases?".length));
    state.q = p.get("q") || ""; state.outcome = p.get("outcome") || ""; state.op = p.get("op") || "";
    state.dtype = p.get("dtype") || ""; state.tag = p.get("tag") || ""; state.limit = PAGE;
    syncControls(); render();
    $("cases").scrollIntoView();
  }
  window.addEventListener("hashchange", applyHash);

  document.querySelectorAll("button.copy").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var code = btn.parentNode.querySelector("code");
      var done = function () { btn.textContent = "copied"; setTimeout(function () { btn.textContent = "copy"; }, 1500); };
      var select = function () {
        var range = document.createRange(); range.selectNodeContents(code);
        var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
        btn.textContent = "selected: press Ctrl+C";
      };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(code.textContent).then(done, select);
      else select();
    });
  });

  render();
  applyHash();
})();
