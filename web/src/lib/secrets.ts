// Secrets (issue 50) in words, for Settings › Secrets and the forms that name secrets (no
// React): where a secret applies, how the scope choice of the form maps onto the API's
// workspace and repository, the order the list shows them in, and names typed as a list.
import type { RepositoryDto, SecretDto } from '../api/types';

/** Where a secret applies, as the form's scope choice says it: the server, the workspace
 * shown, or one of its repositories (`repository:<id>`). */
export type ScopeChoice = 'server' | 'workspace' | `repository:${string}`;

/** The scope choice of a stored secret. */
export function scopeOf(s: SecretDto): ScopeChoice {
  if (s.scope === 'repository' && s.repository_id !== null) return `repository:${s.repository_id}`;
  return s.scope === 'server' ? 'server' : 'workspace';
}

/** The workspace and repository a choice names, as the secret actions take them: neither for
 * the server's scope. */
export function scopeRequest(choice: ScopeChoice, workspaceId: string): { workspace_id?: string; repository_id?: string } {
  if (choice === 'server') return {};
  if (choice === 'workspace') return { workspace_id: workspaceId };
  return { workspace_id: workspaceId, repository_id: choice.slice('repository:'.length) };
}

/** A choice in words: "Server", "Workspace", "Repository widget". */
export function scopeLabel(choice: ScopeChoice, repositories: RepositoryDto[]): string {
  if (choice === 'server') return 'Server';
  if (choice === 'workspace') return 'Workspace';
  const id = choice.slice('repository:'.length);
  const repository = repositories.find((r) => r.id === id);
  return repository ? `Repository ${repository.name}` : 'Repository (removed)';
}

/** The server's secrets first, then the workspace's, then each repository's (by the
 * repository's name); by name within each. */
export function sortSecrets(secrets: SecretDto[], repositories: RepositoryDto[]): SecretDto[] {
  const rank = { server: 0, workspace: 1, repository: 2 };
  const repoName = (s: SecretDto) => repositories.find((r) => r.id === s.repository_id)?.name ?? '';
  return [...secrets].sort(
    (a, b) => rank[a.scope] - rank[b.scope] || repoName(a).localeCompare(repoName(b)) || a.name.localeCompare(b.name),
  );
}

/** Whether `secrets` has one called `name` in `choice` (setting it replaces its value). */
export function exists(secrets: SecretDto[], choice: ScopeChoice, name: string): boolean {
  const wanted = name.trim();
  return wanted !== '' && secrets.some((s) => s.name === wanted && scopeOf(s) === choice);
}

/** The secrets' names, each once, with the scopes that have it ("server, workspace"): the
 * suggestions of a field that names a secret. */
export function suggestions(secrets: SecretDto[]): { name: string; scopes: string }[] {
  const scopes = new Map<string, Set<string>>();
  for (const s of secrets) scopes.set(s.name, (scopes.get(s.name) ?? new Set()).add(s.scope));
  return [...scopes.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, where]) => ({ name, scopes: [...where].join(', ') }));
}

/** Names typed as a list ("A, B" or "A B"), each once, in the order typed. */
export function namesFrom(text: string): string[] {
  return [...new Set(text.split(/[\s,]+/).filter((n) => n !== ''))];
}

/** The suggestions of a field taking names as a list ("A, B"), as a datalist offers whole
 * values: the text typed with its last, partly typed name completed by each of `names` (with
 * where it is set) not in the list already. */
export function listCompletions(text: string, names: { name: string; scopes: string }[]): { value: string; scopes: string }[] {
  const partial = /[^\s,]*$/.exec(text)?.[0] ?? '';
  const head = text.slice(0, text.length - partial.length);
  const typed = new Set(namesFrom(head));
  return names
    .filter((n) => !typed.has(n.name) && n.name.startsWith(partial))
    .map((n) => ({ value: `${head}${n.name}`, scopes: n.scopes }));
}
