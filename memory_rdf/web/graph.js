(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var svg = document.getElementById("graph");
  if (!svg) return;
  var tip = document.getElementById("tip");
  var details = document.getElementById("details");
  var nodes = {}, adj = {};
  data.nodes.forEach(function (n) { nodes[n.id] = n; adj[n.id] = []; });
  data.edges.forEach(function (e, i) { adj[e.a].push(i); adj[e.b].push(i); });
  svg.querySelectorAll("title").forEach(function (t) { t.remove(); });
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c];
    });
  }
  function name(id) { var n = nodes[id]; return n.ghost ? "forgotten" : (n.phrase || id); }
  function meta(n) {
    if (n.ghost) return "forgotten — only the links that pointed at it remain";
    var bits = [];
    if (n.focus !== null) bits.push("focus #" + (n.focus + 1));
    bits.push("importance " + n.importance.toFixed(2));
    bits.push(n.hop + (n.hop === 1 ? " hop" : " hops") + " from the focus");
    bits.push("scanned " + n.scans + "×");
    if (n.original) bits.push(n.content.length + " of " + n.original + " characters left");
    if (n.hidden) bits.push(n.hidden + " more link" + (n.hidden > 1 ? "s" : "") + " outside");
    return bits.join(" · ");
  }
  function nodeHtml(n, full) {
    if (n.ghost) return "<b>forgotten memory</b><div class='meta'>" + esc(meta(n)) + "</div>";
    var text = full || n.content.length <= 400 ? n.content : n.content.slice(0, 400) + "…";
    var chips = n.keywords.map(function (k) { return "<span class='chip'>" + esc(k) + "</span>"; });
    return "<div class='phrase'><b>" + esc(n.phrase) + "</b></div><div class='content'>" +
      esc(text) + "</div><div>" + chips.join("") + "</div><div class='meta'>" + esc(meta(n)) +
      "</div>";
  }
  function edgeLines(e) {
    return e.dirs.map(function (d) {
      return esc(name(d.s)) + " → " + esc(name(d.t)) + (d.r ? " (" + esc(d.r) + ")" : "") +
        ": strength " + d.w.toFixed(2) + (d.dangling ? " — target forgotten" : "");
    });
  }
  function place(ev) {
    var x = ev.clientX + 16, y = ev.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) x = ev.clientX - w - 16;
    if (y + h > window.innerHeight - 8) y = window.innerHeight - h - 8;
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }
  function highlight(id) {
    svg.classList.add("hl");
    function on(o) {
      svg.querySelectorAll('[data-node="' + o + '"], [data-label="' + o + '"]')
        .forEach(function (el) { el.classList.add("on"); });
    }
    on(id);
    adj[id].forEach(function (i) {
      var e = data.edges[i];
      svg.querySelector('[data-edge="' + i + '"]').classList.add("on");
      on(e.a); on(e.b);
    });
  }
  function clear() {
    svg.classList.remove("hl");
    svg.querySelectorAll(".on").forEach(function (el) { el.classList.remove("on"); });
  }
  function select(id) {
    svg.querySelectorAll(".sel").forEach(function (el) { el.classList.remove("sel"); });
    var n = nodes[id];
    if (!n) return;
    svg.querySelectorAll('[data-node="' + id + '"], [data-label="' + id + '"]')
      .forEach(function (el) { el.classList.add("sel"); });
    var rows = adj[id].map(function (i) { return edgeLines(data.edges[i]).join("<br>"); });
    details.innerHTML = nodeHtml(n, true) +
      (rows.length ? "<div class='meta' style='margin-top:8px'><b>Links</b><br>" +
       rows.join("<br>") + "</div>" : "");
  }
  svg.addEventListener("mouseover", function (ev) {
    var g = ev.target.closest("[data-node]"), p = ev.target.closest("[data-edge]");
    if (g) {
      var n = nodes[g.getAttribute("data-node")];
      clear(); highlight(n.id);
      tip.innerHTML = nodeHtml(n, false);
    } else if (p) {
      tip.innerHTML = edgeLines(data.edges[+p.getAttribute("data-edge")]).join("<br>");
    } else { return; }
    tip.style.display = "block"; place(ev);
  });
  svg.addEventListener("mousemove", function (ev) {
    if (tip.style.display === "block") place(ev);
  });
  svg.addEventListener("mouseout", function (ev) {
    if (ev.relatedTarget && (ev.relatedTarget.closest("[data-node]") ||
        ev.relatedTarget.closest("[data-edge]"))) return;
    tip.style.display = "none"; clear();
  });
  svg.addEventListener("click", function (ev) {
    var g = ev.target.closest("[data-node]");
    if (g) select(g.getAttribute("data-node"));
  });
  document.querySelectorAll("[data-select]").forEach(function (li) {
    li.addEventListener("click", function () { select(li.getAttribute("data-select")); });
  });
  // labels: about the same size on screen at any zoom; where they would overlap, the more
  // important memory keeps its label (focus first) and the others show on hover
  var vb = svg.viewBox.baseVal, drag = null, pending = false;
  var order = data.nodes.slice().sort(function (a, b) {
    var fa = a.focus === null ? 1e9 : a.focus, fb = b.focus === null ? 1e9 : b.focus;
    return fa - fb || (a.ghost - b.ghost) || b.importance - a.importance;
  });
  function scale() {
    var r = svg.getBoundingClientRect();
    return r.width && r.height ? Math.max(vb.width / r.width, vb.height / r.height) : 1;
  }
  function labels() {
    pending = false;
    // zoomed in (s < 1): 12 px on screen; zoomed out: shrink gently (the layout made room
    // for 12 user units per label line)
    var s = scale();
    svg.style.setProperty("--fs", (12 * (s <= 1 ? s : Math.sqrt(s))).toFixed(3));
    var taken = [], dots = data.nodes.map(function (n) {
      return {id: n.id, x1: n.x - n.r, y1: n.y - n.r, x2: n.x + n.r, y2: n.y + n.r};
    });
    function hits(box, o) {
      return box.x1 < o.x2 && o.x1 < box.x2 && box.y1 < o.y2 && o.y1 < box.y2;
    }
    order.forEach(function (n) {
      var t = svg.querySelector('[data-label="' + n.id + '"]');
      if (!t) return;
      t.classList.remove("crowded");
      var b = t.getBBox(), pad = 3 * scale();
      var box = {x1: n.x + b.x - pad, y1: n.y + b.y - pad, x2: n.x + b.x + b.width + pad,
                 y2: n.y + b.y + b.height + pad};
      var clash = taken.some(function (o) { return hits(box, o); }) ||
        (n.focus === null && dots.some(function (o) { return o.id !== n.id && hits(box, o); }));
      if (clash) t.classList.add("crowded"); else taken.push(box);
    });
  }
  function relabel() { if (!pending) { pending = true; requestAnimationFrame(labels); } }
  labels();
  window.addEventListener("resize", relabel);
  // zoom (wheel) and pan (drag) by moving the viewBox
  function point(ev) {
    var r = svg.getBoundingClientRect();
    var s = Math.max(vb.width / r.width, vb.height / r.height);
    var ox = (r.width * s - vb.width) / 2, oy = (r.height * s - vb.height) / 2;
    return {x: vb.x - ox + (ev.clientX - r.left) * s,
            y: vb.y - oy + (ev.clientY - r.top) * s, s: s};
  }
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var p = point(ev), k = Math.exp(ev.deltaY * 0.0015);
    vb.x = p.x - (p.x - vb.x) * k; vb.y = p.y - (p.y - vb.y) * k;
    vb.width *= k; vb.height *= k;
    relabel();
  }, {passive: false});
  svg.addEventListener("mousedown", function (ev) {
    if (ev.target.closest("[data-node]")) return;
    drag = {x: ev.clientX, y: ev.clientY, vx: vb.x, vy: vb.y, s: point(ev).s};
    svg.classList.add("panning");
  });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    vb.x = drag.vx - (ev.clientX - drag.x) * drag.s;
    vb.y = drag.vy - (ev.clientY - drag.y) * drag.s;
  });
  window.addEventListener("mouseup", function () { drag = null; svg.classList.remove("panning"); });
  // page.html#node=ID opens with that memory selected and its links highlighted
  var wanted = /^#node=(.+)$/.exec(window.location.hash);
  if (wanted && nodes[decodeURIComponent(wanted[1])]) {
    var id = decodeURIComponent(wanted[1]);
    select(id); highlight(id); labels();
  }
})();
