// Issue 18 scope 5 (part): Settings › Notifications adds a webhook channel, tests it, shows
// its delivery log live and deletes it; the sound (off by default) and the title's badge
// count what arrives while the tab is in the background.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, test } from './kandev';

// The receivers listen on 127.0.0.1, which a server reaches only with the opt-in.
test.use({ kandevFlags: ['--allow-private-notification-targets'] });

declare global {
  interface Window {
    __hidden: boolean;
    __kandevSounds?: number;
  }
}

/** A local webhook receiver: every POST body it got. */
async function receiver(): Promise<{ url: string; bodies: string[]; close: () => void }> {
  const bodies: string[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      bodies.push(body);
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook/secret-path`, bodies, close: () => server.close() };
}

test('i18: a webhook channel is added, tested, logs its deliveries and is deleted', async ({ page, kandev }) => {
  const hook = await receiver();
  try {
    await page.goto(`${kandev.url}/settings/notifications`);
    const form = page.getByRole('form', { name: 'Add channel' });
    await form.getByLabel('URL').fill(hook.url);
    await form.getByLabel('Turn completed').check();
    await form.getByRole('button', { name: 'Add channel' }).click();
    const table = page.getByRole('table', { name: 'Notification channels' });
    const row = table.locator('tbody tr[data-channel-id]');
    await expect(row).toHaveCount(1);
    await expect(row).toContainText(new URL(hook.url).origin);
    await expect(row).not.toContainText('secret-path'); // the URL past its origin is never shown
    await expect(row).toContainText('Permission requested, Question asked, Turn completed');

    await row.getByRole('button', { name: 'Test' }).click();
    await expect(table.getByTestId('channel-test-result')).toHaveText(
      'Test delivered (204) · the receiver sent no text back',
    );
    expect(JSON.parse(hook.bodies[0]).notification.title).toBe('Kandev: test notification');

    // A real record: the first turn of a new task ends; the log shows it live.
    await kandev.createTask('Logged', { start_agent: true });
    const log = page.getByRole('table', { name: 'Delivery log' });
    await expect(log.locator('tbody tr[data-status="delivered"]')).toHaveCount(1);
    await expect(log.locator('tbody tr')).toContainText(' · 204');
    expect(hook.bodies).toHaveLength(2);

    await row.getByRole('button', { name: 'Delete' }).click();
    await expect(page.getByText('No channels yet.')).toBeVisible();
    expect((await kandev.api('notification.channel.list', {})).channels).toEqual([]);
  } finally {
    hook.close();
  }
});

test('i18: with the sound on, a record in a background tab chimes and counts in the title', async ({ page, kandev }) => {
  await page.addInitScript(() => {
    window.__hidden = false;
    Object.defineProperty(document, 'visibilityState', { get: () => (window.__hidden ? 'hidden' : 'visible') });
    Object.defineProperty(document, 'hidden', { get: () => window.__hidden });
  });
  await page.goto(`${kandev.url}/settings/notifications`);
  const sound = page.getByLabel(/Play a sound when an agent needs you/);
  await expect(sound).not.toBeChecked(); // off by default
  await sound.check();
  const task = await kandev.createTask('Chime', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await expect(page.locator('[data-kind="agent"]').first()).toHaveText('echo: Chime');
  // The first turn's record is announced with its end (one transaction): seen while visible.
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  await expect(page).toHaveTitle('Chime — Kandev');

  await page.evaluate(() => (window.__hidden = true));
  const sessions = await kandev.api('task.session.list', { task_id: task.id });
  await kandev.api('message.add', { session_id: sessions.sessions[0].id, content: 'once more' });
  await expect(page).toHaveTitle('(1 new) Chime — Kandev');
  expect(await page.evaluate(() => window.__kandevSounds)).toBe(1);

  await page.evaluate(() => {
    window.__hidden = false;
    document.dispatchEvent(new Event('visibilitychange'));
  });
  await expect(page).toHaveTitle('Chime — Kandev');
  await page.goto(`${kandev.url}/settings/notifications`);
  await expect(page.getByLabel(/Play a sound when an agent needs you/)).toBeChecked(); // kept
});
