// Issue 49 (teams), the web side: the owner invites a viewer and a member through Settings ›
// Members; the viewer's task page has no composer, no permission answers and no terminal, and
// says why; the member works on the task but sees no profile or repository script controls;
// the owner has them all, and the Users and Activity pages. A role changed while the viewer's
// page is open reaches that page (the server closes its socket; it reconnects and re-reads).
import { execFileSync } from 'node:child_process';
import type { Browser, Page } from '@playwright/test';
import { binary, expect, gitRepo, type Kandev, removeRepo, test, transcript } from './kandev';

const PASSWORD = 'correct horse battery';

function addUser(kandev: Kandev, name: string): void {
  execFileSync(binary, ['user', 'add', name, '--home', kandev.home], { input: `${PASSWORD}\n` });
}

/** A new browser context signed in as `name`, on `path`. */
async function signedIn(browser: Browser, kandev: Kandev, name: string, path: string): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${kandev.url}${path}`);
  await expect(page).toHaveURL(/\/login/);
  await page.getByLabel('Name').fill(name);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(page.getByTestId('user-name')).toHaveText(name);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  return page;
}

const composer = (page: Page) => page.getByRole('textbox', { name: 'Message to the agent' });
const permission = (page: Page) => transcript(page).locator('[data-kind="permission_request"]');

test('i49 roles: a viewer reads, a member works, the owner manages members, users and sees the activity', async ({
  browser,
  kandev,
}) => {
  test.setTimeout(120_000);
  // Set up while the server has no accounts yet (everyone may do everything): a repository
  // with a setup script, and a task whose agent waits on a permission.
  const { workspaceId, workflowId } = await kandev.board();
  const { workspaces } = await kandev.api('workspace.list');
  const workspaceName: string = workspaces[0].name;
  const dir = gitRepo({ 'README.md': '# widget\n' });
  removeRepo(dir);
  await kandev.api('repository.create', { workspace_id: workspaceId, local_path: dir, name: 'widget', setup_script: 'echo ready' });
  const { task, session } = await kandev.api('task.create', { workflow_id: workflowId, title: 'Shared task', start_agent: true });
  await expect
    .poll(async () => (await kandev.api('session.get', { id: session.id })).session.state, { timeout: 20_000 })
    .toBe('WAITING_FOR_INPUT');
  await kandev.api('message.add', { session_id: session.id, content: '#!mock\nask_permission Edit README.md\nsay done' });
  const taskPath = `/tasks/${task.id}`;

  // The first user is the owner; vera and mike join the workspace through Members.
  addUser(kandev, 'owen');
  addUser(kandev, 'vera');
  addUser(kandev, 'mike');
  const owner = await signedIn(browser, kandev, 'owen', '/settings/members');
  const invite = owner.getByRole('form', { name: 'Add member' });
  await invite.getByLabel('User').fill('vera');
  await invite.getByLabel('Role').selectOption('viewer');
  await invite.getByRole('button', { name: 'Add member' }).click();
  await expect(owner.getByLabel('Role of vera')).toHaveValue('viewer');
  await invite.getByLabel('User').fill('mike');
  await invite.getByLabel('Role').selectOption('member');
  await invite.getByRole('button', { name: 'Add member' }).click();
  await expect(owner.getByLabel('Role of mike')).toHaveValue('member');
  // A name that is no user is refused, in the form.
  await invite.getByLabel('User').fill('nobody');
  await invite.getByRole('button', { name: 'Add member' }).click();
  await expect(invite.getByRole('alert')).toBeVisible();
  await expect(owner.locator('tr[data-member]')).toHaveCount(2);

  // The viewer: the conversation and the permission request, nothing to act with.
  const vera = await signedIn(browser, kandev, 'vera', taskPath);
  await expect(permission(vera)).toContainText('Edit README.md');
  await expect(permission(vera)).toContainText('waiting for a member of the workspace to answer');
  await expect(permission(vera).getByRole('button')).toHaveCount(0);
  await expect(vera.getByTestId('role-note')).toHaveText(
    'Viewers can read this task; ask an admin of the workspace to make you a member to work on it.',
  );
  await expect(composer(vera)).toHaveCount(0);
  await expect(vera.getByRole('toolbar', { name: 'Session controls' })).toHaveCount(0);
  await expect(vera.getByRole('button', { name: 'New session' })).toHaveCount(0);
  await expect(vera.getByRole('button', { name: 'Edit task' })).toHaveCount(0);
  await vera.getByRole('tab', { name: 'Terminal' }).click();
  await expect(vera.getByTestId('role-note')).toContainText('Terminals');
  await expect(vera.getByRole('button', { name: '+ Terminal' })).toHaveCount(0);
  await expect(vera.getByRole('button', { name: 'Start dev server' })).toHaveCount(0);
  await vera.goto(kandev.url);
  await expect(vera.locator('.columns[data-loaded="true"]')).toBeVisible();
  await expect(vera.locator('[data-task-id]').first()).toBeVisible();
  await expect(vera.getByRole('button', { name: 'New task' })).toHaveCount(0);
  await vera.goto(`${kandev.url}${taskPath}`);
  await expect(permission(vera)).toContainText('waiting for a member');

  // The member: works on the task (composer, permission answers), no terminal, and Settings
  // offers no profile or repository changes (their scripts run on the server).
  const mike = await signedIn(browser, kandev, 'mike', taskPath);
  await expect(composer(mike)).toBeVisible();
  await expect(permission(mike).getByRole('button').first()).toBeVisible();
  await mike.getByRole('tab', { name: 'Terminal' }).click();
  await expect(mike.getByRole('button', { name: 'Start dev server' })).toBeVisible();
  await expect(mike.getByRole('button', { name: '+ Terminal' })).toHaveCount(0);
  await mike.goto(`${kandev.url}/settings/profiles`);
  await expect(mike.getByRole('table', { name: 'Agent profiles' }).locator('tbody tr').first()).toBeVisible();
  await expect(mike.getByTestId('role-note')).toHaveText('Agent profiles are added and changed, and agents installed, by admins.');
  await expect(mike.getByRole('button', { name: 'Add profile' })).toHaveCount(0);
  // Installing agents is for admins too (issue 51): the agents are listed, without Versions….
  await expect(mike.getByRole('table', { name: 'Agents on this machine' }).locator('tr[data-kind="qwen"]')).toContainText('Qwen Code');
  await expect(mike.getByRole('button', { name: 'Versions…' })).toHaveCount(0);
  await expect(mike.getByRole('button', { name: 'Edit' })).toHaveCount(0);
  await mike.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Repositories' }).click();
  await expect(mike.getByRole('cell', { name: 'widget' })).toBeVisible();
  await expect(mike.getByTestId('role-note')).toContainText('Repositories and their scripts');
  await expect(mike.getByRole('button', { name: 'Edit widget' })).toHaveCount(0);
  await expect(mike.getByLabel(/Setup script/)).toHaveCount(0);
  await expect(mike.getByRole('form', { name: 'Add repository' })).toHaveCount(0);
  const mikeNav = mike.getByRole('navigation', { name: 'Settings' });
  await expect(mikeNav.getByRole('link', { name: 'Members' })).toBeVisible();
  await expect(mikeNav.getByRole('link', { name: 'Users' })).toHaveCount(0);
  await expect(mikeNav.getByRole('link', { name: 'Activity' })).toHaveCount(0);

  // The owner has what the others lack.
  await owner.goto(`${kandev.url}/settings/repositories`);
  await owner.getByRole('button', { name: 'Edit widget' }).click();
  await expect(owner.getByRole('form', { name: 'Edit repository widget' }).getByLabel(/Setup script/)).toHaveValue('echo ready');
  await owner.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Agent profiles' }).click();
  await expect(owner.getByRole('button', { name: 'Add profile' })).toBeVisible();
  await owner.goto(`${kandev.url}${taskPath}?tab=terminal`);
  await expect(owner.getByRole('button', { name: '+ Terminal' })).toBeVisible();

  // Users: the owner's badge and each user's role by workspace name.
  await owner.goto(`${kandev.url}/settings/users`);
  const users = owner.getByRole('table', { name: 'Users' });
  await expect(users.locator('tr[data-user="owen"]').getByTestId('owner-badge')).toHaveText('owner');
  await expect(users.locator('tr[data-user="vera"]').getByTestId('user-roles')).toHaveText(`${workspaceName}: viewer`);
  await expect(users.locator('tr[data-user="mike"]').getByTestId('user-roles')).toHaveText(`${workspaceName}: member`);
  await expect(users.locator('tr[data-user="vera"]').getByTestId('owner-badge')).toHaveCount(0);
  // A user added here signs in to no workspace until a member of one; removing asks first.
  const add = owner.getByRole('form', { name: 'Add user' });
  await add.getByLabel('Name').fill('nina');
  await add.getByLabel(/Password/).fill(PASSWORD);
  await add.getByRole('button', { name: 'Add user' }).click();
  await expect(users.locator('tr[data-user="nina"]').getByTestId('user-roles')).toHaveText('none yet');
  const nina = await signedIn(browser, kandev, 'nina', '/');
  await expect(nina.getByTestId('no-workspace')).toHaveText(
    'You are not a member of any workspace yet: ask an admin of one to add you.',
  );
  await owner.getByRole('button', { name: 'Remove nina' }).click();
  await owner.getByRole('dialog').getByRole('button', { name: 'Delete user' }).click();
  await expect(users.locator('tr[data-user="nina"]')).toHaveCount(0);
  await expect(users.locator('tr[data-user]')).toHaveCount(3);
  // Her page's access ended: it goes to the login form by itself.
  await expect(nina).toHaveURL(/\/login/);
  await expect(users.locator('tr[data-user="owen"]').getByRole('button', { name: 'Remove owen' })).toHaveCount(0);

  // Activity: the two invitations, newest first, by the owner; filtered by an action's start.
  await owner.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Activity' }).click();
  const activity = owner.getByRole('table', { name: 'Activity' });
  const invitations = activity.locator('tr[data-action="workspace.member.set"]');
  await expect(invitations).toHaveCount(2);
  await expect(invitations.first().getByRole('cell').nth(1)).toHaveText('owen');
  await expect(invitations.first().getByRole('cell').nth(3)).toHaveText(workspaceName);
  const filter = owner.getByRole('form', { name: 'Filter the activity' });
  await filter.getByLabel(/Action/).fill('task.');
  await filter.getByRole('button', { name: 'Show' }).click();
  await expect(activity.getByText('Nothing matches.')).toBeVisible();
  await filter.getByLabel(/Action/).fill('workspace.');
  await filter.getByLabel('User').fill('owen');
  await filter.getByRole('button', { name: 'Show' }).click();
  await expect(invitations).toHaveCount(2);

  // A role changed while the viewer's page is open: the page follows (the composer appears).
  await owner.goto(`${kandev.url}/settings/members`);
  await owner.getByLabel('Role of vera').selectOption('member');
  await expect(owner.getByLabel('Role of vera')).toHaveValue('member');
  await expect(composer(vera)).toBeVisible();
  await expect(vera.getByTestId('role-note')).toHaveCount(0);

  // More entries than a page: the older ones come with "Load older", then it goes.
  await owner.evaluate(async (workspace_id) => {
    for (let i = 0; i < 55; i++) {
      const r = await fetch('/api/v1/prompt.create', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ workspace_id, name: `p${i}`, body: 'text' }),
      });
      if (!r.ok) throw new Error(`prompt ${i}: ${r.status}`);
    }
  }, workspaceId);
  await owner.goto(`${kandev.url}/settings/activity`);
  await filter.getByLabel(/Action/).fill('prompt.create');
  await filter.getByRole('button', { name: 'Show' }).click();
  const prompts = activity.locator('tr[data-action="prompt.create"]');
  await expect(prompts).toHaveCount(50);
  await owner.getByRole('button', { name: 'Load older' }).click();
  await expect(prompts).toHaveCount(55);
  await expect(owner.getByRole('button', { name: 'Load older' })).toHaveCount(0);
});
