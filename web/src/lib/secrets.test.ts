import { describe, expect, it } from 'vitest';
import type { RepositoryDto, SecretDto } from '../api/types';
import { exists, listCompletions, namesFrom, scopeLabel, scopeOf, scopeRequest, sortSecrets, suggestions } from './secrets';

const repo = (id: string, name: string): RepositoryDto => ({ id, name }) as unknown as RepositoryDto;
const secret = (name: string, scope: SecretDto['scope'], repositoryId: string | null = null): SecretDto => ({
  id: `${scope}-${repositoryId ?? ''}-${name}`,
  name,
  scope,
  workspace_id: scope === 'server' ? null : 'w1',
  repository_id: repositoryId,
  created_at: '2026-01-01T00:00:00Z',
  updated_at: '2026-01-01T00:00:00Z',
});
const repos = [repo('r1', 'widget'), repo('r2', 'api')];

describe('scopes (where a secret applies)', () => {
  it('maps a stored secret to the form’s choice and the choice to the request', () => {
    expect([secret('A', 'server'), secret('A', 'workspace'), secret('A', 'repository', 'r1')].map(scopeOf)).toEqual([
      'server',
      'workspace',
      'repository:r1',
    ]);
    expect(scopeRequest('server', 'w1')).toEqual({});
    expect(scopeRequest('workspace', 'w1')).toEqual({ workspace_id: 'w1' });
    expect(scopeRequest('repository:r1', 'w1')).toEqual({ workspace_id: 'w1', repository_id: 'r1' });
  });

  it('says a scope in words, naming the repository', () => {
    expect(['server', 'workspace', 'repository:r1', 'repository:gone'].map((c) => scopeLabel(c as 'server', repos))).toEqual([
      'Server',
      'Workspace',
      'Repository widget',
      'Repository (removed)',
    ]);
  });
});

describe('sortSecrets', () => {
  it('lists the server’s, then the workspace’s, then each repository’s by its name; by name within', () => {
    const sorted = sortSecrets(
      [secret('B', 'repository', 'r1'), secret('Z', 'workspace'), secret('A', 'repository', 'r2'), secret('Y', 'server'), secret('A', 'workspace')],
      repos,
    );
    expect(sorted.map((s) => `${scopeLabel(scopeOf(s), repos)} ${s.name}`)).toEqual([
      'Server Y',
      'Workspace A',
      'Workspace Z',
      'Repository api A',
      'Repository widget B',
    ]);
  });
});

describe('exists (setting a name replaces its value)', () => {
  it('finds a name only in the scope chosen', () => {
    const all = [secret('TOKEN', 'workspace')];
    expect(exists(all, 'workspace', ' TOKEN ')).toBe(true);
    expect(exists(all, 'server', 'TOKEN')).toBe(false);
    expect(exists(all, 'workspace', '')).toBe(false);
  });
});

describe('suggestions', () => {
  it('offers each name once, with the scopes that have it', () => {
    expect(suggestions([secret('B', 'workspace'), secret('A', 'server'), secret('B', 'server')])).toEqual([
      { name: 'A', scopes: 'server' },
      { name: 'B', scopes: 'workspace, server' },
    ]);
  });
});

describe('namesFrom', () => {
  it('reads names separated by commas or spaces, each once', () => {
    expect(namesFrom(' A, B  C,,A ')).toEqual(['A', 'B', 'C']);
    expect(namesFrom('  ')).toEqual([]);
  });
});

describe('listCompletions (a list of names, completed by a datalist)', () => {
  const names = [
    { name: 'E2E_TOKEN', scopes: 'workspace' },
    { name: 'GITHUB_TOKEN', scopes: 'server, workspace' },
    { name: 'NPM_TOKEN', scopes: 'repository' },
  ];
  it('offers every name for an empty field', () => {
    expect(listCompletions('', names).map((c) => c.value)).toEqual(['E2E_TOKEN', 'GITHUB_TOKEN', 'NPM_TOKEN']);
  });
  it('completes the last name, keeping what is typed before it and leaving out names already listed', () => {
    expect(listCompletions('GITHUB_TOKEN, ', names)).toEqual([
      { value: 'GITHUB_TOKEN, E2E_TOKEN', scopes: 'workspace' },
      { value: 'GITHUB_TOKEN, NPM_TOKEN', scopes: 'repository' },
    ]);
    expect(listCompletions('GITHUB_TOKEN,N', names).map((c) => c.value)).toEqual(['GITHUB_TOKEN,NPM_TOKEN']);
    expect(listCompletions('E2E_TOKEN GITHUB_TOKEN', names).map((c) => c.value)).toEqual(['E2E_TOKEN GITHUB_TOKEN']);
  });
});
