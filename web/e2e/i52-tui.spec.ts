// Issue 52 scope 2 in the browser: a task's session started in the agent's own terminal UI
// (the built-in Mock profile runs `kandev fake-tui`) shows that terminal as its main panel with
// a badge of what its screen shows, and a message from the composer is typed into it.
import { expect, gitRepo, removeRepo, screenshot, send, test } from './kandev';

test('i52: a session started in the terminal UI shows its screen and takes messages from the composer', async ({
  page,
  kandev,
}) => {
  const repo = gitRepo({ 'README.md': '# demo\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Tidy the docs', { repository_ids: [repository.id] });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(page.getByTestId('connection')).toHaveText('Live');
    // The task's first step starts its first (ACP) session; the terminal-UI one is a second.
    await expect(page.getByRole('tab', { name: /Mock 1/ })).toBeVisible();

    // Started with no first message: the program draws its screen and waits for input.
    await page.getByRole('button', { name: 'New session' }).click();
    const dialog = page.getByRole('dialog', { name: 'New session' });
    await dialog.getByRole('checkbox', { name: "Start in the agent's own terminal UI" }).check();
    await dialog.getByRole('button', { name: 'Start agent' }).click();
    await expect(page.getByRole('tab', { name: /Mock 2/ })).toHaveAttribute('aria-selected', 'true');

    const screen = page.getByRole('group', { name: "The agent's terminal UI" }).locator('.xterm-rows');
    await expect(screen).toContainText('Fake TUI agent');
    await expect(page.getByTestId('tui-screen')).toHaveText('Waiting for input');
    await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
    // The ACP-only controls are the terminal's to do.
    const bar = page.getByRole('toolbar', { name: 'Session controls' });
    await expect(bar.getByRole('button', { name: 'Reset context' })).toHaveCount(0);
    await expect(bar.getByRole('button', { name: 'Move to another agent…' })).toHaveCount(0);

    // A message from the composer is typed into the terminal UI, which answers there.
    await send(page, 'hello there');
    await expect(screen).toContainText('● echo: hello there');
    await expect(page.getByTestId('tui-screen')).toHaveText('Waiting for input');
    await screenshot(page, 'i52-tui-session');

    // Stopped, the program ends; a message starts it again and the view attaches to it anew.
    await bar.getByRole('button', { name: 'Stop', exact: true }).click();
    await expect(page.getByTestId('session-state')).toHaveText('CANCELLED');
    await send(page, 'back again');
    await expect(screen).toContainText('● echo: back again');
  } finally {
    removeRepo(repo);
  }
});
