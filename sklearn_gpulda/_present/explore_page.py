"""The report's interactive explorer: its HTML, style and script, all inline.

:func:`explorer_html` returns one ``<section>``: a map of the topics (static SVG, drawn by
Python so that it shows without scripts too), a topic list, a lambda slider over term bars, a
word search and, when texts were given, the documents that load most on the selected topic.
The script reads the numbers of :func:`~sklearn_gpulda._present.explore_data.explorer_data`
from a JSON block, and loads nothing: no library, font or image comes from the network.
Every text the data carries reaches the page through ``textContent``, never as markup.
"""

import json
from html import escape

import numpy as np

MAP_WIDTH, MAP_HEIGHT, MAP_MARGIN = 560, 460, 40


def json_block(data):
    """``data`` as JSON that cannot end its ``<script>`` element early."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def map_svg(xy, shares, labels):
    """The topic map: one circle per topic (area proportional to its share) and a label.

    One scale factor serves both axes, so on-screen distance stays proportional to the
    fitted distance. Labels start on their circles; the page's script moves them apart.
    """
    xy = np.asarray(xy, dtype=np.float64)
    n = xy.shape[0]
    span = max(np.ptp(xy[:, 0]) if n else 0, np.ptp(xy[:, 1]) if n else 0)
    inner_w, inner_h = MAP_WIDTH - 2 * MAP_MARGIN, MAP_HEIGHT - 2 * MAP_MARGIN
    scale = min(inner_w, inner_h) / span if span > 0 else 0.0
    mid = (xy.max(axis=0) + xy.min(axis=0)) / 2 if n else np.zeros(2)
    px = MAP_WIDTH / 2 + (xy[:, 0] - mid[0]) * scale
    py = MAP_HEIGHT / 2 - (xy[:, 1] - mid[1]) * scale
    # Circles as large as the spacing allows: the largest gets about half the median distance
    # to a nearest neighbour, so most circles stay apart and a clump still shows as one.
    if n > 1:
        d = np.hypot(px[:, None] - px[None, :], py[:, None] - py[None, :])
        np.fill_diagonal(d, np.inf)
        r_max = float(np.clip(0.5 * np.median(d.min(axis=1)), 10, 48))
    else:
        r_max = 48.0
    shares = np.asarray(shares, dtype=np.float64)
    radius = r_max * np.sqrt(shares / max(shares.max(), 1e-300))
    radius = np.maximum(radius, 3.0)
    circles, texts = [], []
    for k in np.argsort(-shares, kind="stable"):  # small circles drawn last, on top
        circles.append(
            f'<circle class="topic" data-topic="{k}" cx="{px[k]:.1f}" cy="{py[k]:.1f}" '
            f'r="{radius[k]:.1f}"><title>{escape(labels[k])} ({shares[k]:.1%})</title></circle>')
        texts.append(f'<text class="maplabel" data-topic="{k}" x="{px[k]:.1f}" '
                     f'y="{py[k]:.1f}">{escape(labels[k])}</text>')
    return (f'<svg id="topic-map" xmlns="http://www.w3.org/2000/svg" width="{MAP_WIDTH}" '
            f'height="{MAP_HEIGHT}" viewBox="0 0 {MAP_WIDTH} {MAP_HEIGHT}" role="img" '
            f'aria-label="map of the topics">'
            f'<g class="circles">{"".join(circles)}</g><g class="leaders"></g>'
            f'<g class="labels">{"".join(texts)}</g></svg>')


def explorer_html(data, map_labels):
    """The explorer section for the dict of
    :func:`~sklearn_gpulda._present.explore_data.explorer_data`."""
    topics = data["topics"]
    xy = np.array([[t["x"], t["y"]] for t in topics])
    shares = np.array([t["share"] for t in topics])
    docs = ('<h3>Documents that load most on it</h3><ol id="docs"></ol>'
            if data["docs"] is not None else
            '<p class="note" id="docs-note">Pass <code>texts=</code> (the documents\' raw '
            'text) to list the documents that load most on each topic.</p>')
    source = ("the reference corpus's token counts" if data["measured"] else
              "the model's own estimate (no reference corpus was given)")
    return f"""<section id="explorer">
<h2>Explore the topics</h2>
<p class="note">Click a topic on the map or in the list. Bars: in grey, a word's frequency
overall ({source}); in red, its estimated frequency in the selected topic. Words are ranked by
relevance, &lambda; log p(w|t) + (1 &minus; &lambda;) log(p(w|t)/p(w)) (Sievert and Shirley,
2014): &lambda; = 1 ranks by probability in the topic, &lambda; = 0 by how much more often the
word occurs in the topic than overall, which favours rare, specific words.</p>
<div class="explore">
<div class="left">
{map_svg(xy, shares, map_labels)}
<p class="note">Topics placed so that distances on the map approximate the Hellinger
distances between their word distributions (metric multidimensional scaling); circle areas are
topic sizes. Labels that do not fit on their circle are moved aside with a leader line.</p>
<div class="search"><label for="word-search">Find a word</label>
<input id="word-search" type="search" autocomplete="off" spellcheck="false"
 placeholder="type a word">
<div id="search-results" aria-live="polite"></div></div>
<ul id="topic-list"></ul>
</div>
<div class="right">
<h3 id="topic-title">Topic</h3>
<div class="slider"><label for="lambda">&lambda; = <output id="lambda-value"></output></label>
<input id="lambda" type="range" min="0" max="1" step="{data['lambdaStep']}"
 value="{data['lambda']}"></div>
<div id="bars"></div>
{docs}
</div>
</div>
<script type="application/json" id="explorer-data">{json_block(data)}</script>
<script>{SCRIPT}</script>
</section>"""


STYLE = """
.explore { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.explore .left { flex: 0 1 560px; min-width: 0; } .explore .right { flex: 1 1 420px; min-width: 0; }
#topic-map { max-width: 100%; height: auto; overflow: visible; display: block; }
#topic-map circle.topic { fill: #2f6db5; fill-opacity: 0.35; stroke: #2f6db5; cursor: pointer; }
#topic-map circle.topic.sel { fill: #c0392b; fill-opacity: 0.55; stroke: #922; stroke-width: 2; }
#topic-map circle.topic.hit { stroke: #e08a00; stroke-width: 3; }
#topic-map text.maplabel { font-size: 12px; text-anchor: middle; dominant-baseline: central;
  fill: #111; cursor: pointer; paint-order: stroke; stroke: #fff; stroke-width: 3px; }
#topic-map text.maplabel.sel { font-weight: 700; }
#topic-map .leaders line { stroke: #888; stroke-width: 1; }
#topic-list { list-style: none; padding: 0; margin: 12px 0; max-height: 320px; overflow-y: auto;
  border: 1px solid #e6e6e6; }
#topic-list li { padding: 3px 8px; cursor: pointer; font-size: 0.9em;
  border-bottom: 1px solid #f0f0f0; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
#topic-list li.sel { background: #fbe3e0; font-weight: 600; }
#topic-list li.hit { background: #fff1d6; }
#topic-list li:hover { background: #eef3fa; }
.search input { width: 240px; padding: 4px 6px; margin-left: 8px; font: inherit; }
#search-results { font-size: 0.9em; margin-top: 6px; min-height: 1.4em; }
#search-results button { font: inherit; margin: 2px 4px 2px 0; cursor: pointer; }
.slider { display: flex; align-items: center; gap: 12px; margin: 8px 0 12px; }
.slider input { flex: 1 1 auto; max-width: 320px; } output { font-variant-numeric: tabular-nums; }
#bars .bar-row { display: flex; align-items: center; gap: 8px; height: 19px; font-size: 0.88em; }
#bars .term { flex: 0 0 130px; text-align: right; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; }
#bars .track { flex: 1 1 auto; position: relative; height: 13px; }
#bars .overall { position: absolute; left: 0; top: 0; height: 13px; background: #cfd6de; }
#bars .in-topic { position: absolute; left: 0; top: 0; height: 13px; background: #c0392b; }
#docs li { margin-bottom: 8px; font-size: 0.9em; } #docs .share { color: #666; }
"""

# The page's behaviour. Plain ES2017, no library: the data is small and the drawing is a few
# SVG attributes and list items.
SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("explorer-data").textContent);
  var topics = data.topics, words = data.words, logpw = data.logpw, freq = data.freq;
  var svg = document.getElementById("topic-map");
  var slider = document.getElementById("lambda");
  var selected = 0;
  var wordIndex = new Map();
  words.forEach(function (w, i) { wordIndex.set(w.toLowerCase(), i); });

  function byTopic(selector) {
    var out = {};
    document.querySelectorAll(selector).forEach(function (el) {
      (out[el.dataset.topic] = out[el.dataset.topic] || []).push(el);
    });
    return out;
  }

  // Ranking of a topic's candidate words at one lambda: relevance descending.
  function ranked(k, lam) {
    var t = topics[k], rows = [];
    for (var i = 0; i < t.w.length; i++) {
      var w = t.w[i], lp = t.lp[i];
      rows.push({word: w, n: t.n[i], lp: lp, score: lam * lp + (1 - lam) * (lp - logpw[w])});
    }
    rows.sort(function (a, b) { return b.score - a.score || a.word - b.word; });
    return rows.slice(0, data.nTerms);
  }

  function drawBars() {
    var lam = Number(slider.value);
    document.getElementById("lambda-value").textContent = lam.toFixed(2);
    var rows = ranked(selected, lam), box = document.getElementById("bars");
    var top = Math.max.apply(null, rows.map(function (r) { return freq[r.word]; })
      .concat([1e-300]));
    box.textContent = "";
    rows.forEach(function (r) {
      var row = document.createElement("div"), term = document.createElement("span");
      var track = document.createElement("div"), all = document.createElement("div");
      var part = document.createElement("div");
      row.className = "bar-row"; term.className = "term"; track.className = "track";
      all.className = "overall"; part.className = "in-topic";
      term.textContent = words[r.word];
      all.style.width = (100 * freq[r.word] / top) + "%";
      part.style.width = (100 * r.n / top) + "%";
      row.title = words[r.word] + ": about " + Math.round(r.n) + " of " +
        Math.round(freq[r.word]) + " tokens in topic " + selected + "; p(w|t) = " +
        Math.exp(r.lp).toPrecision(3) + ", lift = " + Math.exp(r.lp - logpw[r.word]).toPrecision(3);
      track.appendChild(all); track.appendChild(part);
      row.appendChild(term); row.appendChild(track); box.appendChild(row);
    });
  }

  function drawDocs() {
    var list = document.getElementById("docs");
    if (!list || !data.docs) return;
    list.textContent = "";
    data.docs.top[selected].forEach(function (entry) {
      var li = document.createElement("li"), share = document.createElement("span");
      share.className = "share";
      share.textContent = "document " + data.docs.rows[entry[0]] + ", " +
        (100 * entry[1]).toFixed(0) + "% this topic: ";
      li.appendChild(share);
      li.appendChild(document.createTextNode(data.docs.texts[entry[0]]));
      list.appendChild(li);
    });
  }

  function mark(cls, keys) {
    var set = new Set(keys.map(String));
    document.querySelectorAll("[data-topic]").forEach(function (el) {
      el.classList.toggle(cls, set.has(el.dataset.topic));
    });
  }

  function select(k) {
    selected = k;
    mark("sel", [k]);
    var t = topics[k], lead = ranked(k, data.lambda).slice(0, 3).map(function (r) {
      return words[r.word]; });
    document.getElementById("topic-title").textContent = "Topic " + k + " (" +
      (100 * t.share).toFixed(1) + "% of tokens): " + lead.join(", ");
    drawBars();
    drawDocs();
  }

  function buildList() {
    var list = document.getElementById("topic-list");
    topics.forEach(function (t, k) {
      var li = document.createElement("li");
      li.dataset.topic = String(k);
      li.textContent = k + "  " + (100 * t.share).toFixed(1) + "%  " +
        ranked(k, data.lambda).slice(0, 6).map(function (r) { return words[r.word]; }).join(" ");
      list.appendChild(li);
    });
  }

  function search() {
    var query = document.getElementById("word-search").value.trim().toLowerCase();
    var out = document.getElementById("search-results");
    out.textContent = "";
    if (!query) { mark("hit", []); return; }
    var i = wordIndex.get(query), hits = i === undefined ? null : data.search[i];
    if (hits && hits.length) {
      out.appendChild(document.createTextNode("\u201c" + words[i] + "\u201d ranks highest in: "));
      hits.forEach(function (h) {
        var b = document.createElement("button");
        b.type = "button"; b.dataset.hitTopic = String(h[0]);
        b.textContent = "topic " + h[0] + " (#" + h[1] + ")";
        b.addEventListener("click", function () { select(h[0]); });
        out.appendChild(b);
      });
      mark("hit", hits.map(function (h) { return h[0]; }));
      return;
    }
    mark("hit", []);
    var near = words.filter(function (w) { return w.toLowerCase().startsWith(query); })
      .filter(function (w) { return data.search[wordIndex.get(w.toLowerCase())]; }).slice(0, 8);
    out.appendChild(document.createTextNode(near.length ? "Did you mean: " :
      "No topic has \u201c" + query + "\u201d among its top " + data.searchDepth + " words."));
    near.forEach(function (w) {
      var b = document.createElement("button");
      b.type = "button"; b.textContent = w;
      b.addEventListener("click", function () {
        document.getElementById("word-search").value = w; search(); });
      out.appendChild(b);
    });
  }

  // Label placement: largest topics first, each label on its circle if it fits there without
  // touching a placed label, else at the first free spot on rings of growing radius around
  // the circle, joined to it by a leader line. Rings grow without bound, so a free spot always
  // exists; the viewBox then grows to show every label.
  function placeLabels() {
    var labels = byTopic("#topic-map text.maplabel"), circles = byTopic("#topic-map circle.topic");
    var leaders = svg.querySelector("g.leaders"), placed = [], pad = 2;
    var order = topics.map(function (t, k) { return k; })
      .sort(function (a, b) { return topics[b].share - topics[a].share || a - b; });
    function free(box) {
      return placed.every(function (p) {
        return box.x + box.w + pad <= p.x || p.x + p.w + pad <= box.x ||
               box.y + box.h + pad <= p.y || p.y + p.h + pad <= box.y;
      });
    }
    function coversCentre(box, self) {
      return order.some(function (k) {
        if (k === self) return false;
        var c = circles[k][0], x = +c.getAttribute("cx"), y = +c.getAttribute("cy");
        return x > box.x && x < box.x + box.w && y > box.y && y < box.y + box.h;
      });
    }
    order.forEach(function (k) {
      var text = labels[k][0], c = circles[k][0];
      var cx = +c.getAttribute("cx"), cy = +c.getAttribute("cy"), r = +c.getAttribute("r");
      var bb = text.getBBox(), w = bb.width, h = bb.height;
      var best = null;
      var centre = {x: cx - w / 2, y: cy - h / 2, w: w, h: h};
      if (free(centre) && !coversCentre(centre, k)) best = centre;
      for (var ring = 0; !best && ring < 400; ring++) {
        var dist = r + 3 + ring * (h / 2 + 1), steps = 16 + 4 * ring;
        for (var s = 0; s < steps && !best; s++) {
          var a = 2 * Math.PI * s / steps, ux = Math.cos(a), uy = Math.sin(a);
          // The box's centre lies beyond `dist` by half its size along the direction.
          var bx = cx + ux * (dist + w / 2) - w / 2, by = cy + uy * (dist + h / 2) - h / 2;
          var box = {x: bx, y: by, w: w, h: h};
          if (free(box) && (ring > 60 || !coversCentre(box, k))) best = box;
        }
      }
      if (!best) best = {x: cx - w / 2, y: cy + r + 3 + 400 * h, w: w, h: h};
      text.setAttribute("x", (best.x + w / 2).toFixed(1));
      text.setAttribute("y", (best.y + h / 2).toFixed(1));
      placed.push(best);
      if (best !== centre) {
        // Leader from the circle's edge towards the label's nearest point.
        var nx = Math.min(Math.max(cx, best.x), best.x + w);
        var ny = Math.min(Math.max(cy, best.y), best.y + h);
        var d = Math.hypot(nx - cx, ny - cy) || 1;
        var line = document.createElementNS("http://www.w3.org/2000/svg", "line");
        line.setAttribute("x1", (cx + (nx - cx) * r / d).toFixed(1));
        line.setAttribute("y1", (cy + (ny - cy) * r / d).toFixed(1));
        line.setAttribute("x2", nx.toFixed(1)); line.setAttribute("y2", ny.toFixed(1));
        line.dataset.leader = String(k);
        leaders.appendChild(line);
      }
    });
    var all = svg.getBBox(), m = 6;
    var x0 = Math.min(0, all.x - m), y0 = Math.min(0, all.y - m);
    var x1 = Math.max(+svg.getAttribute("width"), all.x + all.width + m);
    var y1 = Math.max(+svg.getAttribute("height"), all.y + all.height + m);
    svg.setAttribute("viewBox", [x0, y0, x1 - x0, y1 - y0].map(function (v) {
      return v.toFixed(1); }).join(" "));
    svg.setAttribute("width", (x1 - x0).toFixed(0));
    svg.setAttribute("height", (y1 - y0).toFixed(0));
  }

  svg.addEventListener("click", function (event) {
    var el = event.target.closest("[data-topic]");
    if (el) select(Number(el.dataset.topic));
  });
  document.getElementById("topic-list").addEventListener("click", function (event) {
    var el = event.target.closest("[data-topic]");
    if (el) select(Number(el.dataset.topic));
  });
  slider.addEventListener("input", drawBars);
  document.getElementById("word-search").addEventListener("input", search);
  buildList();
  placeLabels();
  select(topics.reduce(function (best, t, k) {
    return t.share > topics[best].share ? k : best; }, 0));
  document.documentElement.dataset.explorerReady = "1";
})();
"""
