// Issue 18 acceptance 5 (part): a permission request that arrives while the tab is in the
// background raises a browser notification (Chromium with the permission granted), and
// clicking it opens the task.
import { expect, test } from './kandev';

declare global {
  interface Window {
    __shown: { title: string; body?: string }[];
    __lastShown: Notification | null;
    __hidden: boolean;
  }
}

test('i18 a5: a permission request in a background tab raises a browser notification that opens the task', async ({
  page,
  kandev,
}) => {
  await page.context().grantPermissions(['notifications'], { origin: kandev.url });
  await page.addInitScript(() => {
    window.__shown = [];
    window.__lastShown = null;
    window.__hidden = false;
    const Real = window.Notification;
    class Recording extends Real {
      constructor(title: string, options?: NotificationOptions) {
        super(title, options);
        window.__shown.push({ title, body: options?.body });
        window.__lastShown = this;
      }
    }
    Object.defineProperty(Recording, 'permission', { get: () => Real.permission });
    window.Notification = Recording as typeof Notification;
    // The test decides whether the tab is in the background.
    Object.defineProperty(document, 'visibilityState', { get: () => (window.__hidden ? 'hidden' : 'visible') });
    Object.defineProperty(document, 'hidden', { get: () => window.__hidden });
  });
  const task = await kandev.createTask('Needs a yes', { start_agent: true });
  await page.goto(kandev.url);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await expect(page.getByRole('button', { name: 'Notify me' })).toHaveCount(0); // already allowed
  const sessions = await kandev.api('task.session.list', { task_id: task.id });
  const session = sessions.sessions[0].id;
  // The first turn ends while the tab is visible: the page shows it, no system notification.
  await expect.poll(async () => (await kandev.api('session.get', { id: session })).session.state).toBe('WAITING_FOR_INPUT');
  await expect.poll(async () => (await kandev.api('notification.list', {})).notifications.length).toBe(1);

  await page.evaluate(() => (window.__hidden = true));
  await kandev.api('message.add', { session_id: session, content: '#!mock\nask_permission Deploy to production' });
  // (The first turn's record may reach the page just after it went to the background.)
  const asked = () =>
    page.evaluate(() => window.__shown.filter((s) => s.title.includes('permission requested')));
  await expect
    .poll(asked)
    .toEqual([
      { title: 'Needs a yes: permission requested: Deploy to production', body: 'The agent is waiting for your answer.' },
    ]);

  await page.evaluate(() => {
    window.__hidden = false;
    window.__lastShown?.onclick?.(new Event('click'));
  });
  await expect(page).toHaveURL(new RegExp(`/tasks/${task.id}`));
  const card = page.getByRole('log', { name: 'Conversation' }).locator('[data-kind="permission_request"]');
  await expect(card).toContainText('Deploy to production');
  await expect(card.getByRole('button', { name: 'Allow once' })).toBeVisible();
});
