// The users page (admins): add users, set their role, reset a password,
// remove them. The daemon writes the users file as kvmd user does.
import { $, api, errorMessage, h, initNav, markReady } from './common.js';

const ROLES = ['viewer', 'operator', 'admin'];
const status = (text) => { $('users-status').textContent = text; };

async function send(method, path, body) {
  const init = { method };
  if (body) {
    init.headers = { 'Content-Type': 'application/json' };
    init.body = JSON.stringify(body);
  }
  const res = await api(path, init);
  if (!res.ok) throw new Error(await errorMessage(res));
  return (await res.json()).result;
}

async function load() {
  const res = await api('/api/auth/users');
  if (!res.ok) {
    status(res.status === 403 ? 'Only an admin can manage users.' : 'Could not load the users: ' + (await errorMessage(res)));
    $('user-form').hidden = true;
    markReady();
    return;
  }
  const list = (await res.json()).result.users;
  const rows = list.map((u) => {
    const role = h('select', { ariaLabel: `Role of ${u.name}` }, ...ROLES.map((r) => h('option', { value: r, textContent: r })));
    role.value = u.role;
    role.addEventListener('change', async () => {
      try {
        await send('PATCH', '/api/auth/users', { name: u.name, role: role.value });
        status(`${u.name} is now ${role.value}.`);
      } catch (e) {
        status('Could not change the role: ' + e.message);
        role.value = u.role;
      }
    });
    const remove = h('button', { type: 'button', className: 'secondary', textContent: 'Remove' });
    remove.setAttribute('aria-label', `Remove ${u.name}`);
    remove.addEventListener('click', async () => {
      if (!confirm(`Remove ${u.name}? Its sessions and tokens end.`)) return;
      try {
        await send('DELETE', '/api/auth/users?name=' + encodeURIComponent(u.name));
        status(`${u.name} removed.`);
      } catch (e) {
        status('Could not remove: ' + e.message);
      }
      await load();
    });
    const row = h('tr', {}, h('td', {}, u.name), h('td', {}, role), h('td', { className: 'actions' }, remove));
    row.dataset.name = u.name;
    return row;
  });
  $('users').tBodies[0].replaceChildren(...rows);
  if (!$('users-status').textContent.endsWith('.')) status(`${list.length} user${list.length === 1 ? '' : 's'}`);
  markReady();
}

$('user-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const name = $('user-name').value.trim();
  try {
    await send('POST', '/api/auth/users', { name, passwd: $('user-passwd').value, role: $('user-role').value });
    status(`${name} added.`);
    $('user-form').reset();
  } catch (e) {
    status('Could not add: ' + e.message);
  }
  await load();
});

$('user-reset').addEventListener('click', async () => {
  const name = $('user-name').value.trim();
  try {
    const revoke = $('user-revoke').checked;
    const r = await send('PATCH', '/api/auth/users', { name, passwd: $('user-passwd').value, revoke_tokens: revoke });
    const n = r.tokens_revoked;
    status(`Password of ${name} reset; its sessions ended` +
      (revoke ? `, ${n} API token${n === 1 ? '' : 's'} revoked.` : '; its API tokens still work.'));
    $('user-form').reset();
  } catch (e) {
    status('Could not reset: ' + e.message);
  }
});

initNav();
load();
