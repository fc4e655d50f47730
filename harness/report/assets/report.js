(function () {
  'use strict';
  var t0 = performance.now();
  var data = JSON.parse(document.getElementById('evalbox-runs').textContent);
  var runs = data.runs, per = data.runs_per_page;
  var list = document.getElementById('runs-list');
  var status = document.getElementById('runs-status');
  var filterBox = document.getElementById('run-filter');
  var verdictBox = document.getElementById('run-verdict');
  var page = 0, shown = runs;
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  var counts = {passed: 0, failed: 0, error: 0};
  runs.forEach(function (r) { counts[r.v]++; });
  document.getElementById('js-count-runs').textContent = runs.length;
  ['passed', 'failed', 'error'].forEach(function (k) {
    document.getElementById('js-count-' + k).textContent = counts[k];
  });
  function checksTable(r) {
    if (!r.checks.length) return el('p', 'note', 'No checks recorded.');
    var t = el('table'), h = el('tr');
    ['check', 'result', 'detail'].forEach(function (s) { h.appendChild(el('th', '', s)); });
    t.appendChild(h);
    r.checks.forEach(function (c) {
      var tr = el('tr', 'check');
      tr.appendChild(el('td', '', c.id));
      tr.appendChild(el('td', c.passed ? 'passed' : 'failed', c.passed ? 'pass' : 'FAIL'));
      tr.appendChild(el('td', '', c.detail));
      t.appendChild(tr);
    });
    return t;
  }
  function transcriptView(text) {
    var box = el('div', 'transcript');
    text.split('\n').forEach(function (line) {
      if (!line) return;
      var j;
      try { j = JSON.parse(line); } catch (e) { box.appendChild(el('pre', '', line)); return; }
      if (j.type === 'header') {
        var who = 'agent ' + j.agent + (j.model ? ', model ' + j.model : '');
        box.appendChild(el('p', 'note', who));
      } else if (j.type === 'step') {
        var s = el('div', 'step ' + j.source);
        s.appendChild(el('b', '', '#' + j.index + ' ' + j.source));
        if (j.reasoning) s.appendChild(el('pre', 'reasoning', j.reasoning));
        if (j.message) s.appendChild(el('pre', 'message', j.message));
        (j.tool_calls || []).forEach(function (c) {
          var what = c.command !== null && c.command !== undefined ? '$ ' + c.command
                                                                   : JSON.stringify(c.input);
          s.appendChild(el('pre', 'tool-call', '[' + c.tool + '] ' + what));
        });
        (j.observations || []).forEach(function (o) {
          var out = o.output || '';
          if (out.length > 4000)
            out = out.slice(0, 4000) + '\n[… ' + (out.length - 4000) + ' more characters]';
          var head = o.exit_code === null ? ''
              : 'exit ' + o.exit_code + (o.is_error ? ' (error)' : '') + '\n';
          s.appendChild(el('pre', 'observation', '→ ' + head + out));
        });
        box.appendChild(s);
      } else if (j.type === 'summary') {
        box.appendChild(el('p', 'note', 'summary: ' + JSON.stringify(j)));
      }
    });
    return box;
  }
  function fill(d, r) {
    if (d.dataset.filled) return;
    d.dataset.filled = '1';
    if (r.err) {
      d.appendChild(el('h4', '', 'Infrastructure error'));
      d.appendChild(el('pre', 'error', r.err));
    }
    d.appendChild(el('h4', '', 'Checks'));
    d.appendChild(checksTable(r));
    d.appendChild(el('h4', '', 'Workspace diff'));
    d.appendChild(r.diff === null ? el('p', 'note', 'No workspace.diff for this run.')
                                  : el('pre', 'diff', r.diff || '(no changes)'));
    d.appendChild(el('h4', '', 'Transcript'));
    d.appendChild(r.transcript === null ? el('p', 'note', 'No transcript.jsonl for this run.')
                                        : transcriptView(r.transcript));
  }
  function row(r) {
    var d = el('details', 'run ' + r.v);
    d.id = 'run-' + r.id;
    var s = el('summary', '', r.c + ' / ' + r.f + ' #' + r.t + ' — ' + r.v +
               (r.score === null ? '' : ' — score ' + r.score.toFixed(2)) +
               (r.wall === null ? '' : ' — ' + (r.wall / 1000).toFixed(1) + 's') +
               ' — ' + r.id);
    d.appendChild(s);
    d.addEventListener('toggle', function () { if (d.open) fill(d, r); });
    return d;
  }
  function render() {
    var pages = Math.max(1, Math.ceil(shown.length / per));
    page = Math.min(page, pages - 1);
    var from = page * per, to = Math.min(shown.length, from + per);
    var frag = document.createDocumentFragment();
    for (var i = from; i < to; i++) frag.appendChild(row(shown[i]));
    list.textContent = '';
    list.appendChild(frag);
    status.textContent = shown.length
        ? 'Showing ' + (from + 1) + '–' + to + ' of ' + shown.length +
        ' run(s) (' + runs.length + ' in all), page ' + (page + 1) + ' of ' + pages
        : 'No run matches.';
    list.dataset.rendered = to - from;
    list.dataset.matching = shown.length;
  }
  function applyFilter() {
    var q = filterBox.value.trim().toLowerCase(), v = verdictBox.value;
    shown = runs.filter(function (r) {
      if (v && r.v !== v) return false;
      return !q || (r.c + ' ' + r.f + ' ' + r.id).toLowerCase().indexOf(q) >= 0;
    });
    page = 0;
    render();
  }
  filterBox.addEventListener('input', applyFilter);
  verdictBox.addEventListener('change', applyFilter);
  document.getElementById('runs-prev').addEventListener('click', function () {
    if (page > 0) { page--; render(); }
  });
  document.getElementById('runs-next').addEventListener('click', function () { page++; render(); });
  // #run=<id> opens that run (links from the errors table; also how a test opens one).
  function openFromHash() {
    var m = /^#run=([0-9A-Za-z_.-]+)$/.exec(location.hash);
    if (!m) return null;
    filterBox.value = m[1];
    verdictBox.value = '';
    applyFilter();
    var d = document.getElementById('run-' + m[1]);
    if (d) { d.open = true; fill(d, shown[0]); }
    return d;
  }
  window.addEventListener('hashchange', function () {
    var d = openFromHash();
    if (d) d.scrollIntoView();
  });
  render();
  // Opened by a link into the page: scroll once the page is laid out.
  var first = openFromHash();
  if (first) window.addEventListener('load', function () { first.scrollIntoView(); });
  document.getElementById('runs').dataset.renderMs = Math.round(performance.now() - t0);
  document.getElementById('runs').dataset.ready = '1';
})();
