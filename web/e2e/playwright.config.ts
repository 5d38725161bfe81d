// Browser tests: Debian's Chromium (never a downloaded browser) driving the real kandev binary.
import { defineConfig } from '@playwright/test';

const chromium = process.env.KANDEV_CHROMIUM ?? '/usr/bin/chromium';

export default defineConfig({
  testDir: '.',
  testMatch: /.*\.spec\.ts$/,
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: true,
  workers: Number(process.env.KANDEV_E2E_WORKERS ?? 2),
  retries: 0,
  reporter: process.env.CI ? [['list']] : [['list']],
  outputDir: '../../test-artifacts/playwright',
  use: {
    headless: true,
    viewport: { width: 1360, height: 860 },
    launchOptions: {
      executablePath: chromium,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--no-first-run',
        '--disable-dev-shm-usage',
      ],
    },
    trace: 'off',
    screenshot: 'only-on-failure',
  },
});
