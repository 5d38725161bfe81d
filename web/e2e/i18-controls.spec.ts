// Issue 18 (scope 2-4): saved prompts (Settings › Prompts, `@name` in the composer), the
// session controls (agent title and version, rename, retry, make primary), a config option
// other than mode and model, and syntax highlighting in the Files tab.
import { expect, send, test, transcript } from './kandev';

test('i18 s1: a saved prompt made in Settings is inserted with @name', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/prompts`);
  const form = page.getByRole('form', { name: 'Add prompt' });
  await form.getByLabel('Name').fill('review');
  await form.getByLabel('Prompt').fill('Check the tests first');
  await form.getByRole('button', { name: 'Add prompt' }).click();
  const saved = page.getByRole('table', { name: 'Saved prompts' });
  await expect(saved.getByRole('row', { name: /@review/ })).toBeVisible();
  await expect(saved.getByRole('row')).toHaveCount(2); // the header and the prompt
  await form.getByLabel('Name').fill('bad name');
  await form.getByLabel('Prompt').fill('x');
  await form.getByRole('button', { name: 'Add prompt' }).click();
  await expect(page.getByRole('alert')).toContainText('name may hold only letters');

  const task = await kandev.createTask('Prompts', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Prompts');
  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.fill('Please: @re');
  const menu = page.getByRole('listbox', { name: 'Saved prompts' });
  await expect(menu.getByRole('option')).toHaveText(['@review — Check the tests first']);
  await box.press('Enter');
  await expect(box).toHaveValue('Please: Check the tests first');
  await box.press('Enter');
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toHaveText('echo: Please: Check the tests first');
});

test('i18 s2: the session bar shows the agent, renames, retries and makes another session primary', async ({ page, kandev }) => {
  const task = await kandev.createTask('Controls', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Controls');
  await expect(page.getByTestId('agent-info')).toHaveText(/^Kandev mock agent \d+\.\d+\.\d+$/);

  await page.getByRole('button', { name: 'Rename' }).click();
  await page.getByRole('textbox', { name: /Name/ }).fill('Writer');
  await page.getByRole('button', { name: 'Save' }).click();
  await expect(page.getByTestId('session-name')).toHaveText('Writer');
  await expect(page.getByRole('tab', { name: 'Writer' })).toBeVisible();

  await page.getByRole('button', { name: 'Retry last message' }).click();
  await expect(transcript(page).locator('[data-kind="user"]')).toHaveText(['Controls', 'Controls']);
  await expect(transcript(page).locator('[data-kind="agent"]')).toHaveText(['echo: Controls', 'echo: Controls']);

  const { session } = await kandev.api('session.launch', { task_id: task.id });
  await page.goto(`${kandev.url}/tasks/${task.id}?session=${session.id}`);
  await page.getByRole('button', { name: 'Make primary' }).click();
  await expect(page.getByRole('button', { name: 'Make primary' })).toHaveCount(0);
  const after = await kandev.api('task.get', { id: task.id });
  expect(after.task.primary_session_id).toBe(session.id);
});

test('i18 s3: a config option other than mode and model has a picker; the mock confirms it', async ({ page, kandev }) => {
  const task = await kandev.createTask('Options', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Options');
  const thinking = page.getByRole('combobox', { name: 'Thinking', exact: true });
  await expect(thinking.locator('option')).toHaveText(['Low', 'Medium', 'High']);
  await expect(thinking).toHaveValue('medium');
  await thinking.selectOption('high');
  await expect(thinking).toBeEnabled();
  await send(page, '#!mock\nselection');
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toHaveText(
    'selection: mode=default model=mock-fast thought_level=high',
  );
  await page.reload();
  await expect(page.getByRole('combobox', { name: 'Thinking', exact: true })).toHaveValue('high');
});

test('i18 s4: the Files tab highlights source code', async ({ page, kandev }) => {
  const task = await kandev.createTask('Highlight', { start_agent: true });
  const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Highlight');
  await kandev.api('message.add', {
    session_id: sessions[0].id,
    content: '#!mock\nwrite src/main.rs fn main() {\\n    // hi\\n    let n = 42;\\n}\nsay written',
  });
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toHaveText('written');
  await page.getByRole('tab', { name: 'Files' }).click();
  await page.getByRole('navigation', { name: 'Files' }).getByRole('button', { name: 'main.rs' }).click();
  const pre = page.getByRole('region', { name: 'File src/main.rs' }).locator('pre.file-content');
  await expect(pre).toHaveAttribute('data-language', 'rust');
  await expect(pre.locator('.hljs-keyword').first()).toHaveText('fn');
  await expect(pre.locator('.hljs-comment')).toHaveText('// hi');
  await expect(pre.locator('.hljs-number')).toHaveText('42');
  await expect(pre).toHaveText('fn main() {\n    // hi\n    let n = 42;\n}');
});
