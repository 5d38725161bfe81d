// Issue 21, acceptance 5: once a user exists the browser signs in with a name and password at
// /login, sees who it is, and logs out (after which the board sends it back to /login).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, repoRoot, test } from './kandev';

const binary = process.env.KANDEV_BIN ?? join(repoRoot, 'target/debug/kandev');

test('i21_a5 a user logs in with name and password and logs out', async ({ page, kandev }) => {
  // `kandev user add` on the running server's database; the password comes on stdin.
  execFileSync(binary, ['user', 'add', 'alice', '--home', kandev.home], {
    input: 'correct horse battery\n',
  });

  await page.goto(kandev.url);
  await expect(page).toHaveURL(/\/login$/);
  await page.getByLabel('Name').fill('alice');
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('alert')).toHaveText('Wrong name or password.');

  await page.getByLabel('Name').fill('alice');
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await expect(page.getByTestId('user-name')).toHaveText('alice');

  await page.getByRole('button', { name: 'Log out' }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto(kandev.url);
  await expect(page).toHaveURL(/\/login$/);
});

test('i38_6 a page whose access ends elsewhere goes to the login form by itself', async ({
  page,
  kandev,
}) => {
  // An open server's page, live; then the first user is added on the database.
  await page.goto(kandev.url);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  execFileSync(binary, ['user', 'add', 'bob', '--home', kandev.home], {
    input: 'correct horse battery\n',
  });
  // The server closes the page's WebSocket saying access ended: the page logs in again
  // instead of reconnecting for ever.
  await expect(page).toHaveURL(/\/login$/);

  // A login session ended by a password change elsewhere does the same.
  await page.getByLabel('Name').fill('bob');
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('connection')).toHaveText('Live');
  execFileSync(binary, ['user', 'passwd', 'bob', '--home', kandev.home], {
    input: 'another horse battery\n',
  });
  await expect(page).toHaveURL(/\/login$/);
});

test('i45 25: the login page is styled, keeps the name after a wrong password, and lands on the page asked for', async ({
  page,
  kandev,
}) => {
  execFileSync(binary, ['user', 'add', 'carol', '--home', kandev.home], { input: 'correct horse battery\n' });
  await page.goto(`${kandev.url}/settings/workflows`);
  await expect(page).toHaveURL(/\/login\?next=%2Fsettings%2Fworkflows$/);
  const button = page.getByRole('button', { name: 'Sign in', exact: true });
  expect(await button.evaluate((b) => getComputedStyle(b).borderRadius)).toBe('8px');
  await expect(page.locator('main.card')).toBeVisible();
  await page.getByLabel('Name').fill('carol');
  await page.getByLabel('Password').fill('not it');
  await button.click();
  await expect(page.getByRole('alert')).toHaveText('Wrong name or password.');
  await expect(page.getByLabel('Name')).toHaveValue('carol');
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(page).toHaveURL(`${kandev.url}/settings/workflows`);
  await expect(page.getByTestId('user-name')).toHaveText('carol');
});
