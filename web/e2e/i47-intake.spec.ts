// Issue 47 in the web UI: Settings › Intake makes a webhook-only source whose URL and secret
// are shown once, a signed delivery becomes a task whose page links where it came from (and
// the same delivery again is refused as a replay); a schedule's bad cron expression is
// refused in the form, a good one is listed with its next run, none once turned off; the step
// editor offers the write-back actions under the pull request triggers.
import { createHmac } from 'node:crypto';
import { expect, openBoard, test } from './kandev';

test('i47 a: a webhook-only source from settings turns a signed delivery into a task that links its origin, once', async ({
  page,
  kandev,
}) => {
  const { workspaceId, workflowId, steps } = await kandev.board();
  const { workflows } = await kandev.api('workflow.list', { workspace_id: workspaceId });
  const board = workflows.find((w: { id: string }) => w.id === workflowId);
  const start = board.steps.find((s: { is_start_step: boolean }) => s.is_start_step);
  const backlog = steps.find((s) => s.name === 'Backlog')!;

  await page.goto(`${kandev.url}/settings/intake`);
  const sources = page.getByRole('table', { name: 'Intake sources' });
  await expect(sources).toContainText('No sources yet');
  const form = page.getByRole('form', { name: 'Add source' });
  await form.getByLabel(/^Name/).fill('Tracker');
  await form.getByLabel(/^Kind/).selectOption({ label: 'Webhook only' });
  // A webhook-only source has no repository and always checks a generic HMAC signature.
  await expect(form.getByLabel(/^Repository/)).toHaveCount(0);
  await expect(form.getByLabel(/^Webhook/)).toBeDisabled();
  await expect(form.getByLabel(/^Webhook/).locator('option:checked')).toHaveText('Generic HMAC');
  // Its tasks go to the first workflow's start step unless another is chosen.
  await expect(form.getByLabel(/^Step/)).toHaveValue(start.id);
  await form.getByLabel(/^Step/).selectOption({ label: `${board.name} › Backlog` });
  await form.getByRole('button', { name: 'Add source' }).click();

  const panel = page.getByRole('status', { name: 'Webhook of Tracker' });
  await expect(panel).toContainText('it is not shown again');
  const url = await panel.getByRole('textbox', { name: 'Webhook URL' }).inputValue();
  const secret = await panel.getByRole('textbox', { name: 'Webhook secret' }).inputValue();
  expect(url).toMatch(new RegExp(`^${kandev.url}/hooks/[^/]+$`));
  expect(secret.length).toBeGreaterThanOrEqual(16);
  await expect(form.getByLabel(/^Name/)).toHaveValue('');

  const row = sources.locator('tbody tr', { hasText: 'Tracker' });
  await expect(row).toContainText('Webhook only');
  await expect(row).toContainText(`${board.name} › Backlog`);
  await expect(row).toContainText('Generic HMAC');
  await expect(row.locator('code')).toHaveText(url);
  await panel.getByRole('button', { name: 'Done' }).click();
  await expect(panel).toBeHidden();
  // The secret is gone from the page for good: the list never answers it.
  await expect(page.getByText(secret)).toHaveCount(0);

  // A sender signs the body with the secret (from this test's process, not the page).
  const body = JSON.stringify({
    title: 'Crash on save',
    description: 'Reported by a customer',
    external_id: 'TRK-7',
    url: 'https://tracker.example/TRK-7',
  });
  const deliver = () =>
    fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'X-Kandev-Signature': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
        'X-Kandev-Delivery': 'delivery-1',
        'X-Kandev-Event': 'task',
      },
      body,
    });
  const first = await deliver();
  expect(first.status).toBe(201);
  const made = await first.json();
  expect(made).toMatchObject({ outcome: 'created', task: { title: 'Crash on save', step_id: backlog.id } });
  const replay = await deliver();
  expect(replay.status).toBe(409);
  expect(await replay.json()).toMatchObject({ error: 'replayed_delivery' });

  await openBoard(page, kandev);
  const card = page.locator('.card', { hasText: 'Crash on save' });
  await expect(card).toHaveCount(1);
  await expect(page.locator('section.column', { has: card })).toHaveAttribute('data-step-name', 'Backlog');
  await card.click();
  await expect(page).toHaveURL(new RegExp(`/tasks/${made.task.id}`));
  const origin = page.getByRole('link', { name: 'From TRK-7' });
  await expect(origin).toHaveAttribute('href', 'https://tracker.example/TRK-7');
  await expect(origin).toHaveAttribute('target', '_blank');
  await expect(origin).toHaveAttribute('rel', 'noreferrer');
});

test.describe('in Berlin', () => {
  test.use({ timezoneId: 'Europe/Berlin', locale: 'en-GB' });

  test('i47 b: a schedule with a bad cron expression is refused in the form; fixed, it is listed with its next run, none once off', async ({
    page,
    kandev,
  }) => {
    await page.goto(`${kandev.url}/settings/intake`);
    const schedules = page.getByRole('table', { name: 'Schedules' });
    await expect(schedules).toContainText('No schedules yet');
    const form = page.getByRole('form', { name: 'Add schedule' });
    // The browser's zone is the default.
    await expect(form.getByLabel(/^Time zone/)).toHaveValue('Europe/Berlin');
    await form.getByLabel(/^Name/).fill('Weekday triage');
    await form.getByLabel(/^Cron expression/).fill('0 9 * *');
    await form.getByLabel(/^Time zone/).fill('Europe/Berlin');
    await form.getByLabel(/^Task title/).fill('Triage the inbox');
    await form.getByLabel(/^Description/).fill('Label what came in overnight');
    await form.getByLabel('When runs were missed while the server was down').selectOption({ label: 'Skip' });
    await form.getByRole('button', { name: 'Add schedule' }).click();
    const alert = form.getByRole('alert');
    await expect(alert).toContainText('cron expression must have 5 fields');
    await expect(alert).not.toContainText('_');
    await expect(schedules).toContainText('No schedules yet');

    await form.getByLabel(/^Cron expression/).fill('0 9 * * MON-FRI');
    await form.getByRole('button', { name: 'Add schedule' }).click();
    await expect(alert).toBeHidden();
    await expect(form.getByLabel(/^Name/)).toHaveValue('');
    const row = schedules.locator('tbody tr', { hasText: 'Weekday triage' });
    await expect(row.locator('code')).toHaveText('0 9 * * MON-FRI');
    await expect(row).toContainText('Europe/Berlin');
    await expect(row).toContainText('Triage the inbox');
    await expect(row).toContainText('Skip');
    await expect(row).toContainText('None yet');
    // The next run, in this browser's time: a weekday at 09:00.
    const next = row.getByTestId('schedule-next');
    await expect(next).toContainText('09:00');
    const { workspaceId } = await kandev.board();
    const [stored] = (await kandev.api('schedule.list', { workspace_id: workspaceId })).schedules;
    expect(stored).toMatchObject({ cron: '0 9 * * MON-FRI', time_zone: 'Europe/Berlin', missed: 'skip', enabled: true });
    const due = new Date(stored.next_at);
    expect(['Mon', 'Tue', 'Wed', 'Thu', 'Fri']).toContain(
      new Intl.DateTimeFormat('en-US', { weekday: 'short', timeZone: 'Europe/Berlin' }).format(due),
    );

    await row.getByRole('button', { name: 'Turn off' }).click();
    await expect(next).toHaveText('None while off');
    await expect(row.getByRole('button', { name: 'Turn on' })).toBeVisible();
    const [off] = (await kandev.api('schedule.list', { workspace_id: workspaceId })).schedules;
    expect(off).toMatchObject({ enabled: false, next_at: null });
  });
});

test('i47 c: the step editor offers commenting on the issue when pull requests merge or close, and closing it on merge', async ({
  page,
  kandev,
}) => {
  const { workspaceId, workflowId } = await kandev.board();
  await page.goto(`${kandev.url}/settings/workflows`);
  const editor = page.locator('.step-editor', { has: page.locator('summary', { hasText: /^Review/ }) });
  await editor.locator('summary').click();

  const closed = editor.getByRole('group', { name: 'On PR closed' });
  await closed.getByRole('button', { name: '+ action' }).click();
  const closedChoices = closed.getByRole('combobox', { name: 'Action' }).locator('option');
  await expect(closedChoices).toContainText(['Comment on the issue']);
  expect(await closedChoices.allTextContents()).not.toContain('Close the issue');
  await closed.getByRole('button', { name: 'Remove action' }).click();

  const merged = editor.getByRole('group', { name: 'On PR merged' });
  await merged.getByRole('button', { name: '+ action' }).click();
  const action = merged.getByRole('combobox', { name: 'Action' });
  await expect(action.locator('option')).toContainText(['Comment on the issue', 'Close the issue']);
  await action.selectOption({ label: 'Comment on the issue' });
  await merged.getByRole('button', { name: '+ action' }).click();
  await merged.getByRole('combobox', { name: 'Action' }).nth(1).selectOption({ label: 'Close the issue' });
  await editor.getByRole('button', { name: 'Save step' }).click();
  await expect(page.getByText('Saved “Review”')).toBeVisible();

  const { workflows } = await kandev.api('workflow.list', { workspace_id: workspaceId });
  const review = workflows
    .find((w: { id: string }) => w.id === workflowId)
    .steps.find((s: { name: string }) => s.name === 'Review');
  expect(review.events.on_pr_merged).toEqual([{ type: 'comment_issue' }, { type: 'close_issue' }]);
  expect(review.events.on_pr_closed).toEqual([]);
});
