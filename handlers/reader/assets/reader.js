// Hearth's library and reader: what JavaScript adds to pages that work
// without it (keyboard shortcuts, reading progress, highlights, in-place
// updates). No framework, no build step; every request is a same-origin
// form post or fetch that the pages' forms could also make.
(function () {
  "use strict";
  var $ = function (s, el) { return (el || document).querySelector(s); };
  var $$ = function (s, el) { return Array.prototype.slice.call((el || document).querySelectorAll(s)); };

  // Hints at what only this script does come hidden.
  $$(".keyhint,#hl-hint").forEach(function (e) { e.hidden = false; });

  function post(url, data, json) {
    var opts = { method: "POST", credentials: "same-origin", headers: { Accept: "application/json" } };
    if (json) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(data);
    } else {
      var body = new URLSearchParams();
      Object.keys(data).forEach(function (k) {
        [].concat(data[k]).forEach(function (v) { body.append(k, v); });
      });
      opts.body = body;
    }
    return fetch(url, opts).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (b) {
        if (!r.ok) throw new Error(b.error || ("HTTP " + r.status));
        return b;
      });
    });
  }

  // A polite live region for what happened in place.
  function say(text, undo) {
    var n = $("#notice");
    if (!n) {
      n = document.createElement("div");
      n.id = "notice";
      n.className = "notice";
      n.setAttribute("role", "status");
      var at = $(".list h1") || $("#reader .itemnav");
      if (!at) return;
      at.insertAdjacentElement("afterend", n);
    }
    n.textContent = "";
    if (n.tagName === "P") { n.textContent = text; return; }
    var p = document.createElement("p");
    p.textContent = text;
    n.appendChild(p);
    if (undo) {
      var f = document.createElement("form");
      f.method = "post";
      f.action = "/library/items";
      [["action", "undo"], ["undo", undo], ["return", location.pathname + location.search]].forEach(function (kv) {
        var i = document.createElement("input");
        i.type = "hidden"; i.name = kv[0]; i.value = kv[1];
        f.appendChild(i);
      });
      var b = document.createElement("button");
      b.type = "submit"; b.className = "secondary"; b.id = "undo"; b.textContent = "Undo";
      f.appendChild(b);
      n.appendChild(f);
    }
  }

  function typing(e) {
    var t = e.target;
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }

  // ---- The library list ----
  var rows = $$("li.item");
  var cur = -1;
  function setCurrent(i) {
    if (!rows.length) return;
    i = Math.max(0, Math.min(rows.length - 1, i));
    if (rows[cur]) rows[cur].classList.remove("current");
    cur = i;
    rows[cur].classList.add("current");
    $("a.title", rows[cur]).focus();
  }
  function idOf(row) { return $("input[name=id]", row).value; }
  function selectedIDs() {
    var ids = $$("li.item input[name=id]:checked").map(function (c) { return c.value; });
    if (!ids.length && rows[cur]) ids = [idOf(rows[cur])];
    return ids;
  }
  function listAction(action) {
    var ids = selectedIDs();
    if (!ids.length) return;
    post("/library/items", { action: action, id: ids }).then(function (b) {
      rows = rows.filter(function (r) {
        if (ids.indexOf(idOf(r)) < 0) return true;
        if (action !== "read") { r.remove(); return false; }
        r.classList.add("read");
        return true;
      });
      var words = { archive: "Archived.", unarchive: "Moved to the inbox.", trash: "Moved to the trash.", read: "Marked as read.", restore: "Restored." };
      say(words[action] || "Done.", b.undo);
      if (rows.length) setCurrent(Math.min(cur, rows.length - 1));
    }).catch(function (err) { say(err.message); });
  }
  var q = $("#q");
  var inArchive = q && /\bin:archive\b/i.test(q.value);
  var inTrash = q && /\bin:trash\b/i.test(q.value);
  if (location.hash === "#q" && q) q.focus();

  // ---- The reader ----
  var reader = $("#reader");
  var content = $("#content");

  function key(e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e)) return;
    var k = e.key;
    var dlg = $("#shortcuts");
    if (k === "?") { if (dlg && dlg.showModal && !dlg.open) dlg.showModal(); e.preventDefault(); return; }
    if (k === "/") { if (q) { q.focus(); q.select(); } else { location.href = "/library#q"; } e.preventDefault(); return; }
    if (k === "a") { location.href = "/library/add"; return; }
    if (k === "z") { var u = $("#undo"); if (u) u.click(); return; }
    if (reader) { readerKey(k, e); return; }
    if (!rows.length) return;
    switch (k) {
      case "j": setCurrent(cur + 1); break;
      case "k": setCurrent(cur - 1); break;
      case "o": if (rows[cur]) $("a.title", rows[cur]).click(); break;
      case "x": if (rows[cur]) { var c = $("input[name=id]", rows[cur]); c.checked = !c.checked; } break;
      case "e": listAction(inArchive ? "unarchive" : (inTrash ? "restore" : "archive")); break;
      case "#": if (!inTrash) listAction("trash"); break;
      case "m": listAction("read"); break;
      case "l":
        if (rows[cur]) $("input[name=id]", rows[cur]).checked = true;
        var sel = $("#bulk-label"); if (sel) sel.focus();
        break;
      default: return;
    }
    e.preventDefault();
  }
  document.addEventListener("keydown", key);

  function readerKey(k, e) {
    var click = function (s) { var el = $(s); if (el) el.click(); };
    switch (k) {
      case "e": click("#archive"); break;
      case "#": click("#trash"); break;
      case "m": click("#readtoggle"); break;
      case "j": case "n": click("#next"); break;
      case "k": case "p": click("#prev"); break;
      case "u": click("#back"); break;
      case "l": var l = $("#labels-form input[type=checkbox]"); if (l) l.focus(); break;
      case "h": highlightSelection(false); break;
      default: return;
    }
    e.preventDefault();
  }

  if (!reader || !content) return;
  var itemID = reader.dataset.id;

  // ---- Reading progress: restored on open, saved while reading ----
  function progressNow() {
    var r = content.getBoundingClientRect();
    if (r.height <= 0) return 0;
    var seen = (window.innerHeight - r.top) / r.height * 100;
    return Math.max(0, Math.min(100, Math.round(seen)));
  }
  var saved = parseFloat(reader.dataset.progress) || 0;
  if (saved > 0 && saved < 100 && !location.hash) {
    var top = content.getBoundingClientRect().top + window.scrollY;
    window.scrollTo(0, Math.max(0, top + content.offsetHeight * saved / 100 - window.innerHeight));
  }
  var timer = 0;
  function saveProgress() {
    var p = progressNow();
    if (Math.abs(p - saved) < 1) return;
    saved = p;
    post("/library/item/" + encodeURIComponent(itemID) + "/progress", { progress: String(p) }).catch(function () {});
  }
  window.addEventListener("scroll", function () {
    clearTimeout(timer);
    timer = setTimeout(saveProgress, 800);
  }, { passive: true });
  document.addEventListener("visibilitychange", function () { if (document.hidden) saveProgress(); });

  // ---- Text settings: applied at once, kept for the member ----
  var prefs = $("#prefs");
  if (prefs) {
    prefs.addEventListener("change", function () {
      var f = new FormData(prefs);
      var cls = "reader size-" + f.get("size") + " width-" + f.get("width") + " lh-" + f.get("height") +
        (f.get("font") === "serif" ? " serif" : "") + (f.get("theme") ? " theme-" + f.get("theme") : "");
      reader.className = cls;
      post("/library/prefs", { size: f.get("size"), width: f.get("width"), height: f.get("height"), font: f.get("font"), theme: f.get("theme") })
        .catch(function (err) { say(err.message); });
    });
  }

  // ---- Highlights, stored as the segments Inboxt's web app writes ----
  // One segment per text node selected: xpath of its element (marks
  // skipped, same-tag siblings counted) + "::0", offsets in the element's
  // text, the node's text around; last first, as Inboxt's web app does.
  function isMark(el) { return el && el.nodeType === 1 && el.classList.contains("highlight"); }
  function elementOf(node) {
    var el = node.parentElement;
    while (isMark(el)) el = el.parentElement;
    return el;
  }
  function xpathOf(el) {
    var parts = [];
    for (; el && el.nodeType === 1; el = el.parentElement) {
      if (isMark(el)) continue;
      var tag = el.tagName.toLowerCase(), i = 1;
      for (var s = el.previousElementSibling; s; s = s.previousElementSibling) {
        if (!isMark(s) && s.tagName.toLowerCase() === tag) i++;
      }
      parts.unshift(tag + "[" + i + "]");
    }
    return "/" + parts.join("/");
  }
  function textNodes(el) {
    var w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT, null), out = [], n;
    while ((n = w.nextNode())) out.push(n);
    return out;
  }
  function offsetIn(el, node) {
    var n = 0, list = textNodes(el);
    for (var i = 0; i < list.length && list[i] !== node; i++) n += list[i].data.length;
    return n;
  }
  function segmentsOf(range) {
    var segs = [];
    textNodes(content).forEach(function (t) {
      if (!range.intersectsNode(t) || (t.parentElement && t.parentElement.closest("mark.highlight"))) return;
      var s = t === range.startContainer ? range.startOffset : 0;
      var e = t === range.endContainer ? range.endOffset : t.data.length;
      if (e <= s || !t.data.slice(s, e).trim()) return;
      var el = elementOf(t), base = offsetIn(el, t);
      segs.push({
        xpath: xpathOf(el) + "::0",
        startOffset: base + s,
        endOffset: base + e,
        text: t.data.slice(s, e),
        beforeText: t.data.slice(Math.max(0, s - 1000), s),
        afterText: t.data.slice(e, e + 1000)
      });
    });
    return segs.reverse();
  }

  // The element a segment's xpath names: in this page as written, or,
  // for a highlight made elsewhere (Inboxt's web app, an API client), the
  // longest tail of the path that names an element of the article whose
  // text holds the segment's text at its offsets.
  function holds(el, seg) {
    if (!el || !content.contains(el)) return false;
    var t = el.textContent;
    return seg.endOffset <= t.length && (!seg.text || t.slice(seg.startOffset, seg.endOffset) === seg.text);
  }
  function resolve(seg) {
    var path = String(seg.xpath || "").split("::")[0];
    if (!path) return null;
    var at = function (p, ctx) {
      try { return document.evaluate(p, ctx, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue; } catch (e) { return null; }
    };
    var el = at(path, document);
    if (holds(el, seg)) return el;
    var steps = path.replace(/^\/+/, "").split("/");
    for (var i = 0; i < steps.length; i++) {
      el = at("./" + steps.slice(i).join("/"), content);
      if (holds(el, seg)) return el;
    }
    // The article may sit deeper here than where it was highlighted.
    for (i = 1; i < steps.length; i++) {
      el = at(".//" + steps.slice(i).join("/"), content);
      if (holds(el, seg)) return el;
    }
    return null;
  }
  function wrap(el, start, end, id, noted) {
    var pos = 0;
    textNodes(el).forEach(function (t) {
      var len = t.data.length, a = Math.max(start, pos), b = Math.min(end, pos + len);
      pos += len;
      if (b <= a) return;
      var node = t;
      if (a - (pos - len) > 0) node = node.splitText(a - (pos - len));
      if (b - a < node.data.length) node.splitText(b - a);
      var m = document.createElement("mark");
      m.className = "highlight hl" + (noted ? " noted" : "");
      m.dataset.highlightId = id;
      node.parentNode.replaceChild(m, node);
      m.appendChild(node);
    });
  }
  function show(id, segs, noted) {
    // Later offsets first, so earlier wraps do not move them.
    segs.slice().sort(function (a, b) { return b.startOffset - a.startOffset; }).forEach(function (s) {
      var el = resolve(s);
      if (el) wrap(el, s.startOffset, s.endOffset, id, noted);
    });
  }
  function unshow(id) {
    $$('mark.highlight[data-highlight-id="' + id + '"]').forEach(function (m) {
      var p = m.parentNode;
      while (m.firstChild) p.insertBefore(m.firstChild, m);
      p.removeChild(m);
      p.normalize();
    });
  }
  $$("#hl-list li[data-segments]").forEach(function (li) {
    try { show(li.dataset.highlight, JSON.parse(li.dataset.segments), !!$("textarea", li).value); } catch (e) { /* a bad record is listed, not shown */ }
    wire(li);
  });

  function wire(li) {
    var id = li.dataset.highlight;
    // Their input named "action" hides form.action.
    var nf = $("form.note-form", li), df = $("form.delete-form", li);
    nf.addEventListener("submit", function (e) {
      e.preventDefault();
      var note = $("textarea", nf).value;
      post(nf.getAttribute("action"), { action: "note", note: note }).then(function () {
        $$('mark.highlight[data-highlight-id="' + id + '"]').forEach(function (m) { m.classList.toggle("noted", !!note.trim()); });
        say("Note saved.");
      }).catch(function (err) { say(err.message); });
    });
    df.addEventListener("submit", function (e) {
      e.preventDefault();
      post(df.getAttribute("action"), { action: "delete" }).then(function () {
        unshow(id);
        li.remove();
        say("Highlight deleted.");
      }).catch(function (err) { say(err.message); });
    });
  }

  function listItem(h) {
    var li = document.createElement("li");
    li.id = "hl-" + h.id;
    li.dataset.highlight = h.id;
    var bq = document.createElement("blockquote");
    bq.textContent = h.quote;
    li.appendChild(bq);
    var ret = location.pathname + location.search;
    var form = function (cls, action) {
      var f = document.createElement("form");
      f.method = "post"; f.action = "/library/highlight/" + encodeURIComponent(h.id); f.className = cls;
      [["action", action], ["return", ret]].forEach(function (kv) {
        var i = document.createElement("input");
        i.type = "hidden"; i.name = kv[0]; i.value = kv[1];
        f.appendChild(i);
      });
      return f;
    };
    var nf = form("note-form", "note");
    var lab = document.createElement("label");
    lab.htmlFor = "note-" + h.id; lab.textContent = "Note";
    var ta = document.createElement("textarea");
    ta.id = "note-" + h.id; ta.name = "note"; ta.rows = 2; ta.maxLength = 10000; ta.value = h.note || "";
    var sb = document.createElement("button");
    sb.type = "submit"; sb.className = "secondary"; sb.textContent = "Save note";
    nf.append(lab, ta, sb);
    var df = form("delete-form", "delete");
    var db = document.createElement("button");
    db.type = "submit"; db.className = "link"; db.textContent = "Delete highlight";
    df.appendChild(db);
    li.append(nf, df);
    return li;
  }

  // The popover offered for a selection in the article.
  var pop = null;
  function closePop() { if (pop) { pop.remove(); pop = null; } }
  function selectionRange() {
    var sel = window.getSelection();
    if (!sel || sel.isCollapsed || !sel.rangeCount) return null;
    var r = sel.getRangeAt(0);
    if (!content.contains(r.commonAncestorContainer)) return null;
    return r;
  }
  function highlightSelection(withNote, note) {
    var r = selectionRange();
    if (!r) { say("Select text in the article first, then highlight it."); return; }
    var segs = segmentsOf(r);
    if (!segs.length) return;
    if (withNote) { openPop(r, true); return; }
    closePop();
    post("/library/item/" + encodeURIComponent(itemID) + "/highlights", { segments: segs, note: note || "" }, true).then(function (h) {
      window.getSelection().removeAllRanges();
      show(h.id, h.segments, !!h.note);
      var li = listItem(h);
      $("#hl-list").appendChild(li);
      wire(li);
      say("Highlighted.");
    }).catch(function (err) { say(err.message); });
  }
  function openPop(range, noteMode) {
    closePop();
    var rect = range.getBoundingClientRect();
    pop = document.createElement("div");
    pop.className = "hlpop";
    pop.setAttribute("role", "dialog");
    pop.setAttribute("aria-label", "Highlight");
    var b = document.createElement("button");
    b.type = "button"; b.id = "hl-make";
    if (noteMode) {
      var ta = document.createElement("textarea");
      ta.id = "hl-note"; ta.rows = 2; ta.setAttribute("aria-label", "Note"); ta.maxLength = 10000;
      b.textContent = "Save";
      b.addEventListener("click", function () {
        var r = range;
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(r);
        highlightSelection(false, ta.value);
      });
      pop.append(ta, b);
    } else {
      b.textContent = "Highlight";
      b.addEventListener("click", function () { highlightSelection(false); });
      var n = document.createElement("button");
      n.type = "button"; n.className = "secondary"; n.id = "hl-with-note"; n.textContent = "Add a note";
      n.addEventListener("click", function () { openPop(range, true); });
      pop.append(b, n);
    }
    pop.style.setProperty("top", (window.scrollY + rect.bottom + 8) + "px");
    pop.style.setProperty("left", Math.max(8, Math.min(window.scrollX + rect.left, document.documentElement.clientWidth - 260)) + "px");
    document.body.appendChild(pop);
    if (noteMode) $("#hl-note").focus();
  }
  function offer() {
    setTimeout(function () {
      var r = selectionRange();
      if (r && segmentsOf(r).length) openPop(r, false);
    }, 10);
  }
  content.addEventListener("mouseup", offer);
  content.addEventListener("touchend", offer);
  content.addEventListener("keyup", function (e) { if (e.shiftKey) offer(); });
  document.addEventListener("mousedown", function (e) { if (pop && !pop.contains(e.target)) closePop(); });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") closePop(); });
  content.addEventListener("click", function (e) {
    var m = e.target.closest && e.target.closest("mark.highlight");
    if (!m) return;
    var li = document.getElementById("hl-" + m.dataset.highlightId);
    if (li) { li.scrollIntoView({ block: "center" }); $("textarea", li).focus(); }
  });
  if (location.hash.indexOf("#hl-") === 0) {
    var first = $('mark.highlight[data-highlight-id="' + location.hash.slice(4) + '"]');
    if (first) { first.scrollIntoView({ block: "center" }); first.classList.add("flash"); }
  }
})();
