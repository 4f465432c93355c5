/* Case table of report.html: filter, sort and deep links (#cases?outcome=fail&op=..&id=..), no server.
   Every filter a reader sets is written back to the URL, so the view can be linked or reloaded.
   Text from results (ids, messages, tags) is only ever inserted with textContent. */
(function () {
  "use strict";
  var ROWS = JSON.parse(document.getElementById("case-data").textContent);
  var ORDER = JSON.parse(document.getElementById("outcome-order").textContent);
  var COL = { id: 0, op: 1, dtype: 2, outcome: 3, max_abs: 4, max_rel: 5, max_ulp: 6, duration: 7, anchor: 8, message: 9,
              tags: 10, figure: 11, failed: 12, figure_rank: 13, scope: 14, scope_rank: 15, cause: 16 };
  // Columns where failed rows sort above passing ones whatever their numbers (a failure that
  // reads "0 error", index-only or NaN/inf, must not hide among the passes).
  var FAILED_FIRST = { max_abs: 1, max_rel: 1, max_ulp: 1, figure: 1 };
  var FILTERS = ["q", "outcome", "op", "dtype", "scope", "tag", "id"];
  var PAGE = 500;
  var state = { q: "", outcome: "", op: "", dtype: "", scope: "", tag: "", id: "", sort: "outcome", dir: 1, limit: PAGE };
  var $ = function (id) { return document.getElementById(id); };
  var tbody = document.querySelector("#case-table tbody");
  var rank = {};
  ORDER.forEach(function (o, i) { rank[o] = i; });

  // Non-finite errors sort as the worst; a failed row's word ("index", "NaN/inf", "crash"...) below
  // the failed rows' numbers but, through FAILED_FIRST, above every passing row.
  var SPECIAL = { "NaN": Infinity, "Inf": Infinity, "-Inf": Infinity };
  ROWS.forEach(function (r) {
    [COL.max_abs, COL.max_rel, COL.max_ulp].forEach(function (c) {
      if (typeof r[c] === "string") { r.shown = r.shown || {}; r.shown[c] = r[c]; r[c] = SPECIAL[r[c]] !== undefined ? SPECIAL[r[c]] : -1; }
    });
    var t = r[COL.tags] || {};
    r.search = [r[COL.id], r[COL.op], r[COL.dtype], r[COL.outcome], r[COL.message], r[COL.scope] || "", r[COL.cause] || ""]
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
  fillSelect($("f-scope"), COL.scope);

  function fmt(v) {
    if (v === null || v === undefined) return "—";
    if (typeof v !== "number") return String(v);
    if (v === 0) return "0";
    var a = Math.abs(v);
    return (a >= 1e-3 && a < 1e6) ? String(Number(v.toPrecision(4))) : v.toExponential(2);
  }

  function matches(r) {
    if (state.id && r[COL.id] !== state.id) return false;
    if (state.outcome && r[COL.outcome] !== state.outcome) return false;
    if (state.op && r[COL.op] !== state.op) return false;
    if (state.dtype && r[COL.dtype] !== state.dtype) return false;
    if (state.scope && r[COL.scope] !== state.scope) return false;
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
    if (k === "outcome" || k === "scope") {  // grouped by where a failure occurs first
      if (a[COL.scope_rank] !== b[COL.scope_rank]) return d * (a[COL.scope_rank] - b[COL.scope_rank]);
      if (k === "scope" && a[COL.scope] !== b[COL.scope]) return a[COL.scope] < b[COL.scope] ? -d : d;
      x = rank[a[COL.outcome]]; y = rank[b[COL.outcome]];
      x = x === undefined ? -1 : x; y = y === undefined ? -1 : y;
      if (x !== y) return d * (x - y);
      return (b[COL.max_abs] || 0) - (a[COL.max_abs] || 0) || (a[COL.id] < b[COL.id] ? -1 : 1);
    }
    if (FAILED_FIRST[k] && a[COL.failed] !== b[COL.failed]) return d * (a[COL.failed] - b[COL.failed]);
    var col = k === "figure" ? COL.figure_rank : COL[k];
    x = a[col]; y = b[col];
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
      cell(tr, r[COL.figure], r[COL.failed] ? "num fig bad" : "num fig");
      [COL.max_abs, COL.max_rel, COL.max_ulp].forEach(function (c) {
        cell(tr, r.shown && r.shown[c] !== undefined ? r.shown[c] : fmt(r[c]), "num");
      });
      cell(tr, typeof r[COL.duration] === "number" ? r[COL.duration].toFixed(3) : "—", "num dur");
      cell(tr, [r[COL.scope], r[COL.cause]].filter(Boolean).join(" · "), "where");
      var msg = cell(tr, "", "msg");
      var clamp = document.createElement("div");
      clamp.className = "clamp"; clamp.textContent = r[COL.message]; clamp.title = r[COL.message];
      msg.appendChild(clamp);
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
    var chip = [state.tag, state.id ? "id = " + state.id : ""].filter(Boolean).join(" · ");
    $("f-tag").hidden = !chip;
    $("f-tag-text").textContent = chip;
  }

  // The current filters as the URL's hash (replaceState: no history entry per keystroke, no
  // hashchange event, no scroll).
  function writeHash() {
    var p = new URLSearchParams();
    FILTERS.forEach(function (k) { if (state[k]) p.set(k, state[k]); });
    var query = p.toString();
    history.replaceState(null, "", query ? "#cases?" + query : location.pathname + location.search + "#cases");
  }

  function syncControls() {
    $("f-q").value = state.q; $("f-outcome").value = state.outcome;
    $("f-op").value = state.op; $("f-dtype").value = state.dtype; $("f-scope").value = state.scope;
  }

  $("f-form").addEventListener("submit", function (e) { e.preventDefault(); });
  var timer = null;
  $("f-q").addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { state.q = $("f-q").value.trim(); state.limit = PAGE; render(); writeHash(); }, 120);
  });
  ["outcome", "op", "dtype", "scope"].forEach(function (k) {
    $("f-" + k).addEventListener("change", function () {
      state[k] = $("f-" + k).value; state.limit = PAGE; render(); writeHash();
    });
  });
  $("f-tag-clear").addEventListener("click", function () { state.tag = state.id = ""; render(); writeHash(); });
  $("f-reset").addEventListener("click", function () {
    FILTERS.forEach(function (k) { state[k] = ""; }); state.limit = PAGE;
    syncControls(); render(); writeHash();
  });
  $("f-more").addEventListener("click", function () { state.limit = ROWS.length; render(); });
  document.querySelectorAll("#case-table th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var k = th.getAttribute("data-sort");
      if (state.sort === k) state.dir = -state.dir;
      else { state.sort = k; state.dir = (FAILED_FIRST[k] || k === "duration") ? -1 : 1; }
      render();
    });
  });

  function applyHash() {
    var h = location.hash;
    if (h.indexOf("#cases?") !== 0) return;
    var p = new URLSearchParams(h.slice("#cases?".length));
    FILTERS.forEach(function (k) { state[k] = p.get(k) || ""; });
    state.limit = PAGE;
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
