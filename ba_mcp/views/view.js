"use strict";
// ba-mcp's view of a tool result, inside the host's sandboxed iframe (MCP Apps, io.modelcontextprotocol/ui).
// It speaks JSON-RPC 2.0 with the host over postMessage: ui/initialize, then the tool's input and result as
// notifications; it pages, sorts and filters a table artifact through the host with tools/call view_rows.
// Nothing is fetched from the network (the page's CSP forbids it).
(function () {
  var PROTOCOL = "2026-01-26";
  var PAGE = 50;
  var META = "dev.ba-mcp/observation";
  var VIEW = "dev.ba-mcp/view";
  var mode = document.documentElement.getAttribute("data-mode") || "result";
  var root = document.getElementById("view");
  var nextId = 1;
  var pending = {};

  // -- the channel to the host ---------------------------------------------------------------------------
  function send(message) {
    window.parent.postMessage(Object.assign({ jsonrpc: "2.0" }, message), "*");
  }
  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      send({ id: id, method: method, params: params || {} });
    });
  }
  function notify(method, params) {
    send({ method: method, params: params || {} });
  }
  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) return;
    var m = event.data;
    if (!m || m.jsonrpc !== "2.0") return;
    if (m.id !== undefined && m.id !== null && !m.method) {
      var p = pending[m.id];
      if (!p) return;
      delete pending[m.id];
      if (m.error) p.reject(new Error(m.error.message || "error"));
      else p.resolve(m.result);
      return;
    }
    if (m.method && m.id !== undefined && m.id !== null) {
      // a request from the host: teardown and ping are answered; anything else is not served here
      if (m.method === "ui/resource-teardown" || m.method === "ping") send({ id: m.id, result: {} });
      else send({ id: m.id, error: { code: -32601, message: "Method not found" } });
      return;
    }
    if (m.method === "ui/notifications/tool-input") state.input = (m.params || {}).arguments || {};
    else if (m.method === "ui/notifications/tool-result") show(m.params || {});
    else if (m.method === "ui/notifications/host-context-changed") context(m.params || {});
  });

  // -- the host's context: its look, and the display modes it offers (the view supports inline and fullscreen) --
  var SUPPORTED = ["inline", "fullscreen"];
  var display = { mode: "inline", offered: [], button: null };
  function context(ctx) {
    theme(ctx);
    if (Array.isArray(ctx.availableDisplayModes)) display.offered = ctx.availableDisplayModes;
    if (SUPPORTED.indexOf(ctx.displayMode) >= 0) display.mode = ctx.displayMode;
    showDisplayMode();
  }
  function showDisplayMode() {
    // a toggle only where the host offers full screen (Claude Code renders no views; some hosts only inline)
    if (display.offered.indexOf("fullscreen") < 0) {
      if (display.button) display.button.remove();
      display.button = null;
      return;
    }
    if (!display.button) {
      display.button = el("button", { type: "button", class: "display-mode" });
      display.button.addEventListener("click", function () {
        var want = display.mode === "fullscreen" ? "inline" : "fullscreen";
        request("ui/request-display-mode", { mode: want }).then(function (result) {
          if (result && SUPPORTED.indexOf(result.mode) >= 0) display.mode = result.mode;
          showDisplayMode();
        }).catch(function () {});
      });
      document.body.insertBefore(display.button, root);
    }
    var full = display.mode === "fullscreen";
    document.documentElement.setAttribute("data-display", display.mode);
    display.button.textContent = full ? "Exit full screen" : "Full screen";
    display.button.setAttribute("aria-pressed", full ? "true" : "false");
  }

  // -- the host's look -----------------------------------------------------------------------------------
  function theme(context) {
    if (context.theme) document.documentElement.setAttribute("data-theme", context.theme);
    var variables = (context.styles || {}).variables || {};
    Object.keys(variables).forEach(function (name) {
      if (/^--[a-z0-9-]+$/.test(name) && typeof variables[name] === "string") {
        document.documentElement.style.setProperty(name, variables[name]);
      }
    });
  }

  // -- building blocks -----------------------------------------------------------------------------------
  function el(tag, attributes, children) {
    var node = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (k) {
      if (k === "text") node.textContent = attributes[k];
      else node.setAttribute(k, attributes[k]);
    });
    (children || []).forEach(function (c) {
      if (c) node.appendChild(c);
    });
    return node;
  }
  function svg(tag, attributes) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    Object.keys(attributes || {}).forEach(function (k) {
      if (k === "text") node.textContent = attributes[k];
      else node.setAttribute(k, attributes[k]);
    });
    return node;
  }
  function numeric(type) {
    return /int|float|double|decimal|numeric/i.test(type || "");
  }
  function timeLike(column) {
    return /date|timestamp/i.test(column.type || "") || /(^|_)(year|quarter|month|week|day|date|period)(_|$)/i.test(column.name);
  }
  function keyLike(column) {
    return /(^|_)(id|key|code|year|quarter|month|week|day|hour|period|cohort|decile|rank)(_|$)/i.test(column.name);
  }
  function fmt(value, column) {
    if (value === null || value === undefined) return "";
    if (typeof value === "string" && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(value)) {  // a date or time, for people
      return /T00:00:00(\.0+)?$/.test(value) ? value.slice(0, 10) : value.replace("T", " ").replace(/(:\d{2})\.\d+$/, "$1");
    }
    if (column && keyLike(column)) return String(value);  // a year or an id names a row: no separators
    if (typeof value === "number") {
      if (Number.isInteger(value)) return value.toLocaleString("en-US");
      return value.toLocaleString("en-US", { maximumFractionDigits: Math.abs(value) >= 100 ? 0 : 2 });
    }
    return String(value);
  }

  // -- one table: rows paged from its artifact through the host, or whole from the result ---------------
  function Table(spec) {
    this.title = spec.title;
    this.columns = spec.columns;
    this.artifact = spec.artifact;
    this.inline = spec.rows || null;
    this.total = spec.total;
    this.offset = 0;
    this.order = null;
    this.descending = false;
    this.filter = "";
  }
  Table.prototype.fetch = function (offset, limit, order, descending) {
    var self = this;
    if (!self.artifact) {
      var rows = self.inline.slice();
      if (self.filter) {
        var needle = self.filter.toLowerCase();
        rows = rows.filter(function (r) {
          return r.some(function (v) {
            return v !== null && String(v).toLowerCase().indexOf(needle) >= 0;
          });
        });
      }
      if (order !== null) {
        var i = self.columns.map(function (c) { return c.name; }).indexOf(order);
        rows.sort(function (a, b) {
          var x = a[i], y = b[i];
          if (x === y) return 0;
          if (x === null) return 1;
          if (y === null) return -1;
          return (x < y ? -1 : 1) * (descending ? -1 : 1);
        });
      }
      return Promise.resolve({ rows: rows.slice(offset, offset + limit), total_rows: rows.length, offset: offset });
    }
    var args = { artifact_id: self.artifact, offset: offset, limit: limit };
    if (order !== null) { args.order_by = order; args.descending = descending; }
    if (self.filter) args.filter = self.filter;
    return request("tools/call", { name: "view_rows", arguments: args }).then(function (result) {
      if (result.isError) throw new Error(((result.content || [])[0] || {}).text || "view_rows failed");
      return result.structuredContent;
    });
  };
  Table.prototype.render = function () {
    var self = this;
    var body = el("tbody");
    var head = el("tr");
    self.columns.forEach(function (c) {
      var th = el("th", { text: c.name, class: numeric(c.type) ? "num" : "" , scope: "col"});
      th.addEventListener("click", function () {
        self.descending = self.order === c.name ? !self.descending : false;
        self.order = c.name;
        self.offset = 0;
        self.load();
      });
      head.appendChild(th);
    });
    self.headRow = head;
    self.body = body;
    self.status = el("span", { class: "muted status" });
    var filter = el("input", { type: "search", placeholder: "Filter rows", "aria-label": "Filter rows" });
    var timer = null;
    filter.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { self.filter = filter.value; self.offset = 0; self.load(); }, 250);
    });
    function pager(label, name, to) {
      var b = el("button", { text: label, "aria-label": name, "data-page": name });
      b.addEventListener("click", function () { self.offset = Math.max(0, to()); self.load(); });
      return b;
    }
    self.buttons = [
      pager("«", "first", function () { return 0; }),
      pager("‹", "previous", function () { return self.offset - PAGE; }),
      pager("›", "next", function () { return self.offset + PAGE; }),
      pager("»", "last", function () { return Math.floor(Math.max(self.shown - 1, 0) / PAGE) * PAGE; }),
    ];
    var chart = new Chart(self);
    return el("section", { class: "table" }, [
      el("h2", { text: self.title }),
      chart.render(),
      el("div", { class: "bar" }, [filter].concat(self.buttons).concat([self.status])),
      el("div", { class: "scroll" }, [el("table", {}, [el("thead", {}, [head]), body])]),
    ]);
  };
  Table.prototype.load = function () {
    var self = this;
    self.status.textContent = "loading…";
    return self.fetch(self.offset, PAGE, self.order, self.descending).then(function (page) {
      self.shown = page.total_rows;
      self.body.textContent = "";
      page.rows.forEach(function (row) {
        var tr = el("tr");
        row.forEach(function (v, i) {
          tr.appendChild(el("td", { text: fmt(v, self.columns[i]), class: numeric(self.columns[i].type) ? "num" : "" }));
        });
        self.body.appendChild(tr);
      });
      Array.prototype.forEach.call(self.headRow.children, function (th) {
        th.setAttribute("aria-sort", th.textContent === self.order ? (self.descending ? "descending" : "ascending") : "none");
      });
      var last = page.offset + page.rows.length;
      self.status.textContent = page.rows.length
        ? "rows " + fmt(page.offset + 1) + "–" + fmt(last) + " of " + fmt(page.total_rows)
        : "no rows" + (self.filter ? " match" : "");
      self.buttons[0].disabled = self.buttons[1].disabled = page.offset === 0;
      self.buttons[2].disabled = self.buttons[3].disabled = last >= page.total_rows;
      resized();
    }).catch(function (error) {
      self.status.textContent = "could not load rows: " + error.message;
    });
  };

  // -- a chart of a table: bar, line or area of a number by a column, split into series by another ----------
  // The chart is of the whole result: a table shown whole is aggregated here, an artifact in the engine
  // (view_rows with `chart`), which buckets a long time axis by a coarser grain and says so under the chart.
  var SERIES = 8, CATEGORIES = 30;
  var MEAN_LIKE = /pct|percent|rate|ratio|share|avg|average|mean|median|per_|price/i;
  function Chart(table) {
    this.table = table;
  }
  Chart.prototype.render = function () {
    var self = this, columns = self.table.columns;
    var numbers = columns.filter(function (c) { return numeric(c.type) && !timeLike(c); });
    if (!numbers.length || columns.length < 2) return null;
    var labels = columns.filter(function (c) { return numbers.indexOf(c) < 0; });
    var first = labels[0] || columns[0];
    var measure = numbers.filter(function (c) { return c !== first; });
    measure = measure[measure.length - 1] || numbers[0];  // measures come last in a result
    self.x = el("select", { "aria-label": "Chart by" });
    self.y = el("select", { "aria-label": "Chart of" });
    self.kind = el("select", { "aria-label": "Chart type" });
    self.split = el("select", { "aria-label": "Split by" });
    columns.forEach(function (c) { self.x.appendChild(el("option", { value: c.name, text: c.name })); });
    numbers.forEach(function (c) { self.y.appendChild(el("option", { value: c.name, text: c.name })); });
    ["bar", "line", "area"].forEach(function (k) { self.kind.appendChild(el("option", { value: k, text: k })); });
    self.split.appendChild(el("option", { value: "", text: "(one series)" }));
    labels.forEach(function (c) {
      if (!timeLike(c)) self.split.appendChild(el("option", { value: c.name, text: c.name }));
    });
    self.x.value = first.name;
    self.y.value = measure.name;
    self.kind.value = timeLike(first) ? "line" : "bar";  // a series runs along time
    var second = labels.filter(function (c) { return c !== first && !timeLike(c); })[0];
    self.split.value = timeLike(first) && second ? second.name : "";  // revenue by month per region
    self.area = el("div", { class: "chart-area" });
    self.note = el("p", { class: "muted chart-note" });
    [self.x, self.y, self.kind, self.split].forEach(function (s) { s.addEventListener("change", function () { self.draw(); }); });
    setTimeout(function () { self.draw(); }, 0);
    return el("div", { class: "chart-box" }, [
      el("div", { class: "bar" }, [el("span", { text: "Chart", class: "muted" }), self.kind, self.y,
        el("span", { text: "by", class: "muted" }), self.x, el("span", { text: "split by", class: "muted" }), self.split]),
      self.area,
      self.note,
    ]);
  };
  Chart.prototype.points = function (xName, yName, sName) {
    // [[x, series, value]] of the whole result, and a note of what was bucketed or left out
    var t = this.table;
    if (t.artifact) {
      var chart = { x: xName, y: yName };
      if (sName) chart.series = sName;
      return request("tools/call", { name: "view_rows", arguments: { artifact_id: t.artifact, chart: chart } }).then(function (result) {
        if (result.isError) throw new Error(((result.content || [])[0] || {}).text || "view_rows failed");
        var c = result.structuredContent;
        return { points: c.chart.points, grain: c.chart.grain, note: c.note, rows: c.source_rows, mean: c.aggregate === "mean" };
      });
    }
    var names = t.columns.map(function (c) { return c.name; });
    var xi = names.indexOf(xName), yi = names.indexOf(yName), si = sName ? names.indexOf(sName) : -1;
    var mean = MEAN_LIKE.test(yName), cells = {}, order = [];
    t.inline.forEach(function (r) {
      var key = JSON.stringify([r[xi], si >= 0 ? (r[si] === null ? null : String(r[si])) : null]);
      if (!(key in cells)) { cells[key] = { sum: 0, n: 0 }; order.push(key); }
      // a NaN or an infinity (sent as psql's word) is shown in the table, never added into a bar
      if (r[yi] !== null && r[yi] !== undefined && isFinite(Number(r[yi]))) { cells[key].sum += Number(r[yi]) || 0; cells[key].n += 1; }
    });
    var points = order.map(function (key) {
      var k = JSON.parse(key), c = cells[key];
      return [k[0], k[1], c.n ? (mean ? c.sum / c.n : c.sum) : null];
    });
    return Promise.resolve({ points: points, grain: null, note: "", rows: t.inline.length, mean: mean });
  };
  Chart.prototype.draw = function () {
    var self = this, t = self.table, xName = self.x.value, yName = self.y.value, kind = self.kind.value;
    var sName = self.split.value && self.split.value !== xName ? self.split.value : "";
    var xc = t.columns.filter(function (c) { return c.name === xName; })[0];
    var along = timeLike(xc);
    self.points(xName, yName, sName).then(function (got) {
      var totals = {}, xs = [], seriesTotals = {}, series = [];
      got.points.forEach(function (p) {
        var x = p[0] === null ? "(none)" : String(p[0]), s = p[1] === null || p[1] === undefined ? "" : String(p[1]);
        if (!(x in totals)) { totals[x] = 0; xs.push(x); }
        if (!(s in seriesTotals)) { seriesTotals[s] = 0; series.push(s); }
        totals[x] += Math.abs(Number(p[2]) || 0);
        seriesTotals[s] += Math.abs(Number(p[2]) || 0);
      });
      var notes = got.note ? [got.note] : [];
      if (along) xs.sort();
      else {
        xs.sort(function (a, b) { return totals[b] - totals[a]; });
        if (xs.length > CATEGORIES) { notes.push("the " + CATEGORIES + " largest of " + fmt(xs.length) + " " + xName + " values"); xs = xs.slice(0, CATEGORIES); }
      }
      series.sort(function (a, b) { return seriesTotals[b] - seriesTotals[a]; });
      var kept = series.slice(0, SERIES), other = series.length > SERIES;
      if (other) notes.push("the " + SERIES + " largest of " + series.length + " " + sName + " values");
      var index = {};
      xs.forEach(function (x, i) { index[x] = i; });
      var lines = kept.map(function (s) {
        var values = xs.map(function () { return null; });
        got.points.forEach(function (p) {
          var x = p[0] === null ? "(none)" : String(p[0]), ps = p[1] === null || p[1] === undefined ? "" : String(p[1]);
          if (ps === s && x in index) values[index[x]] = (values[index[x]] || 0) + (Number(p[2]) || 0);
        });
        return { name: s, values: values };
      });
      var labels = along ? dateLabels(xs, got.grain) : xs;
      var what = (got.mean ? "mean " : "") + yName + " by " + xName + (sName ? " per " + sName : "");
      notes.unshift("all " + fmt(got.rows) + " rows" + (got.mean ? " (mean of each point's rows)" : ""));
      self.note.textContent = "Chart of " + notes.join("; ");
      self.paint(labels, lines, kind, what);
      resized();
    }).catch(function (error) { self.area.textContent = ""; self.note.textContent = "no chart: " + error.message; });
  };
  function dateLabels(xs, grain) {
    // dates labelled by their grain: 2025, 2025-Q1, 2025-03, 2025-03-01 — never 2025-03-01T00:00:00
    var dates = xs.map(function (x) { return /^\d{4}-\d{2}-\d{2}(T00:00:00(\.0+)?)?$/.test(x) ? x.slice(0, 10) : null; });
    if (dates.some(function (d) { return d === null; })) return xs.map(function (x) { return x.replace("T", " ").replace(/:00(\.0+)?$/, ""); });
    var firstOfMonth = dates.every(function (d) { return d.slice(8) === "01"; });
    var firstOfYear = firstOfMonth && dates.every(function (d) { return d.slice(5, 7) === "01"; });
    var quarters = firstOfMonth && dates.every(function (d) { return ["01", "04", "07", "10"].indexOf(d.slice(5, 7)) >= 0; });
    return dates.map(function (d) {
      if (grain === "year" || (!grain && firstOfYear && dates.length > 1)) return d.slice(0, 4);
      if (grain === "quarter" || (!grain && quarters && !firstOfYear)) return d.slice(0, 4) + "-Q" + (Math.floor((Number(d.slice(5, 7)) - 1) / 3) + 1);
      if (grain === "month" || (!grain && firstOfMonth)) return d.slice(0, 7);
      return d;
    });
  }
  Chart.prototype.paint = function (keys, lines, kind, title) {
    var W = 720, H = 260, L = 64, B = 34, T = 10, area = this.area;
    area.textContent = "";
    var all = [];
    lines.forEach(function (l) { l.values.forEach(function (v) { if (v !== null) all.push(v); }); });
    var chart = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title });
    var low = Math.min(0, Math.min.apply(null, all.concat([0]))), high = Math.max.apply(null, all.concat([0])) || 1;
    var span = (high - low) || 1, step = (W - L - 8) / Math.max(keys.length, 1);
    function y(v) { return T + (H - T - B) * (1 - (v - low) / span); }
    [low, (low + high) / 2, high].forEach(function (v) {
      chart.appendChild(svg("line", { x1: L, x2: W - 8, y1: y(v), y2: y(v) }));
      chart.appendChild(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", text: fmt(Math.round(v * 100) / 100) }));
    });
    if (kind === "bar" || keys.length < 3) {  // a line needs points to join; bars of several series side by side
      var width = step * 0.7 / Math.max(lines.length, 1);
      lines.forEach(function (line, n) {
        line.values.forEach(function (v, i) {
          if (v === null) return;
          chart.appendChild(svg("rect", { class: "s" + n, "data-series": line.name, "data-value": String(v), x: L + i * step + step * 0.15 + n * width, y: Math.min(y(v), y(0)), width: Math.max(width, 1), height: Math.abs(y(v) - y(0)) }));
        });
      });
    } else {
      lines.forEach(function (line, n) {
        var points = [];
        line.values.forEach(function (v, i) { if (v !== null) points.push((L + (i + 0.5) * step).toFixed(1) + "," + y(v).toFixed(1)); });
        if (kind === "area" && points.length && lines.length === 1) {
          chart.appendChild(svg("polygon", { class: "area", points: (L + 0.5 * step) + "," + y(0) + " " + points.join(" ") + " " + (L + (line.values.length - 0.5) * step) + "," + y(0) }));
        }
        chart.appendChild(svg("polyline", { class: "series s" + n, "data-series": line.name, "data-values": line.values.join(","), points: points.join(" ") }));
      });
    }
    var longest = Math.max.apply(null, keys.map(function (k) { return String(k).length; }).concat([1]));
    var every = Math.max(1, Math.ceil(keys.length * Math.min(longest, 14) * 7 / (W - L)));  // labels never overlap
    keys.forEach(function (k, i) {
      if (i % every === 0) chart.appendChild(svg("text", { class: "x-label", x: L + (i + 0.5) * step, y: H - B + 16, "text-anchor": "middle", text: String(k).slice(0, 14) }));
    });
    area.appendChild(chart);
    if (lines.length > 1 || (lines[0] && lines[0].name)) {
      var legend = el("ul", { class: "legend" });
      lines.forEach(function (line, n) { legend.appendChild(el("li", { class: "s" + n, text: line.name || "(none)" })); });
      area.appendChild(legend);
    }
  };

  // -- the result --------------------------------------------------------------------------------------
  var state = { input: {} };
  function show(result) {
    var meta = (result._meta || {})[META] || {};
    var whole = ((result._meta || {})[VIEW] || {}).tables || [];
    var texts = (result.content || []).filter(function (c) { return c.type === "text"; }).map(function (c) { return c.text; });
    var images = (result.content || []).filter(function (c) { return c.type === "image"; });
    root.textContent = "";
    if (result.isError) {
      root.appendChild(el("pre", { class: "bad", text: texts.join("\n") }));
      return resized();
    }
    if (mode === "report") root.appendChild(summary(texts.join("\n")));
    var parts = meta.kind === "composite" ? meta.parts || [] : [meta];
    var image = 0, tables = [];
    parts.forEach(function (part) {
      if (part.kind === "table") {
        var inline = whole.filter(function (t) { return t.label === (part.label || ""); })[0];
        if (!part.artifact_id && !inline) return;
        var table = new Table({
          title: part.label && part.label !== "value" ? part.label : part.title || "result",
          columns: inline ? inline.columns : part.columns,
          artifact: part.artifact_id || null,
          rows: inline ? inline.rows : null,
          total: part.total_rows,
        });
        root.appendChild(table.render());
        tables.push(table);
      } else if (part.kind === "image" && images[image]) {
        var img = images[image++];
        root.appendChild(el("figure", {}, [el("img", { alt: part.title || "figure", src: "data:" + img.mimeType + ";base64," + img.data })]));
      }
    });
    for (; image < images.length; image++) {
      root.appendChild(el("figure", {}, [el("img", { alt: "figure", src: "data:" + images[image].mimeType + ";base64," + images[image].data })]));
    }
    root.appendChild(el("details", {}, [el("summary", { text: "What the model read", class: "muted" }), el("pre", { text: texts.join("\n") })]));
    tables.forEach(function (t) { t.load(); });
    resized();
  }
  function summary(text) {
    var section = text.split(/\n## summary\n/)[1] || "";
    var lines = section.split("\n## ")[0].split("\n").filter(function (l) { return l.trim(); });
    var box = el("section", { class: "summary" });
    if (!lines.length) return box;
    box.appendChild(el("p", { class: "headline", text: lines[0] }));
    var list = el("ul", { class: "conclusions" });
    lines.slice(1).forEach(function (l) {
      list.appendChild(el("li", { class: /NO LONGER HOLDS|changed/.test(l) ? "bad" : /holds|same/.test(l) ? "good" : "", text: l }));
    });
    box.appendChild(list);
    return box;
  }

  // -- size and start ----------------------------------------------------------------------------------
  var lastHeight = 0;
  function resized() {
    var height = Math.ceil(document.documentElement.scrollHeight);
    if (height !== lastHeight) {
      lastHeight = height;
      notify("ui/notifications/size-changed", { width: Math.ceil(document.documentElement.scrollWidth), height: height });
    }
  }
  if (window.ResizeObserver) new ResizeObserver(resized).observe(document.body);
  request("ui/initialize", {
    appInfo: { name: "ba-mcp view", version: "1" },
    appCapabilities: { availableDisplayModes: SUPPORTED },
    protocolVersion: PROTOCOL,
  }).then(function (result) {
    context((result || {}).hostContext || {});
    notify("ui/notifications/initialized", {});
  }).catch(function (error) {
    root.textContent = "The host did not start the view: " + error.message;
  });
})();
