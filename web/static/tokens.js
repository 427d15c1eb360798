// The tokens page: make an API token (shown once), list and revoke them.
import { $, apiJSON, h, initNav, markReady } from './common.js';

const fmtTime = (s) => (s ? new Date(s).toLocaleString() : '—');

async function load() {
  let result;
  try {
    result = await apiJSON('/api/auth/tokens');
  } catch (e) {
    $('tok-status').textContent = 'Could not load the tokens: ' + e.message;
    markReady();
    return;
  }
  const list = result.tokens || [];
  const rows = list.map((t) => {
    const button = h('button', { type: 'button', className: 'secondary', textContent: 'Revoke' });
    button.setAttribute('aria-label', `Revoke the token ${t.name} of ${t.user}`);
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        await apiJSON(`/api/auth/tokens?name=${encodeURIComponent(t.name)}&user=${encodeURIComponent(t.user)}`,
          { method: 'DELETE' });
      } catch (e) {
        $('tok-status').textContent = 'Could not revoke: ' + e.message;
        button.disabled = false;
        return;
      }
      await load();
    });
    const row = h('tr', {}, h('td', {}, t.name), h('td', {}, t.role), h('td', {}, t.expires ? fmtTime(t.expires) : 'never'),
      h('td', {}, fmtTime(t.last_used)), h('td', { className: 'actions' }, button));
    row.dataset.name = t.name;
    return row;
  });
  $('tokens').tBodies[0].replaceChildren(...rows);
  $('tok-status').textContent = `${list.length} token${list.length === 1 ? '' : 's'}`;
  markReady();
}

$('tok-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const button = $('tok-create');
  button.disabled = true;
  $('tok-new').hidden = true;
  try {
    const body = { name: $('tok-name').value.trim(), role: $('tok-role').value, expires: Number($('tok-expires').value) };
    const r = await apiJSON('/api/auth/tokens', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    $('tok-secret').textContent = r.token;
    $('tok-new').hidden = false;
    $('tok-name').value = '';
    await load();
  } catch (e) {
    $('tok-status').textContent = 'Could not create the token: ' + e.message;
  } finally {
    button.disabled = false;
  }
});

initNav();
load();
