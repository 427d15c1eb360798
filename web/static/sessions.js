// The sessions page: the signed-in user's sessions (everyone's for an
// admin), each of which can be ended.
import { $, apiJSON, h, initNav, markReady } from './common.js';

const fmtTime = (s) => (s ? new Date(s).toLocaleString() : '—');

async function end(query, button) {
  button.disabled = true;
  try {
    await apiJSON('/api/auth/sessions?' + query, { method: 'DELETE' });
  } catch (e) {
    $('sess-status').textContent = 'Could not end the session: ' + e.message;
    button.disabled = false;
    return;
  }
  await load();
}

async function load() {
  let result;
  try {
    result = await apiJSON('/api/auth/sessions');
  } catch (e) {
    $('sess-status').textContent = 'Could not load the sessions: ' + e.message;
    markReady();
    return;
  }
  const list = result.sessions || [];
  const rows = list.map((s) => {
    const button = h('button', { type: 'button', className: 'secondary', textContent: 'End' });
    button.dataset.id = s.id;
    button.setAttribute('aria-label', `End the session of ${s.user} from ${s.addr}`);
    button.addEventListener('click', () => end('id=' + encodeURIComponent(s.id), button));
    const row = h('tr', { className: s.current ? 'current' : '' },
      h('td', {}, s.user), h('td', {}, s.addr), h('td', {}, fmtTime(s.created)),
      h('td', {}, fmtTime(s.last_used)), h('td', { className: 'actions' }, s.current ? '' : button));
    row.dataset.id = s.id;
    return row;
  });
  $('sessions').tBodies[0].replaceChildren(...rows);
  $('sess-status').textContent = `${list.length} session${list.length === 1 ? '' : 's'}`;
  $('sess-end-others').hidden = !list.some((s) => !s.current && list.find((c) => c.current)?.user === s.user);
  markReady();
}

$('sess-end-others').addEventListener('click', async (ev) => {
  const me = (await apiJSON('/api/auth/sessions')).sessions.find((s) => s.current);
  if (!me) return;
  // Every other session of mine, one by one: user= would end this one too.
  const list = (await apiJSON('/api/auth/sessions')).sessions.filter((s) => s.user === me.user && !s.current);
  for (const s of list) {
    await apiJSON('/api/auth/sessions?id=' + encodeURIComponent(s.id), { method: 'DELETE' }).catch(() => {});
  }
  await load();
  ev.target.blur();
});

initNav();
load();
