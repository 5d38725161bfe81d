import { describe, expect, it } from 'vitest';
import type { Me, WorkspaceRoleDto } from '../api/types';
import { can, canSomewhere, roleIn, sameGrants } from './roles';

const me = (roles: WorkspaceRoleDto[], owner = false): Me => ({
  user: { id: 'u1', name: 'vera' },
  via: 'session',
  accounts: true,
  owner,
  roles,
});

describe('can (issue 49: what a role may do in a workspace)', () => {
  const viewer = me([{ workspace_id: 'w1', role: 'viewer' }]);
  const member = me([{ workspace_id: 'w1', role: 'member' }]);
  const admin = me([
    { workspace_id: 'w1', role: 'admin' },
    { workspace_id: 'w2', role: 'viewer' },
  ]);

  it('orders the roles viewer < member < admin', () => {
    expect([can(viewer, 'w1', 'viewer'), can(viewer, 'w1', 'member'), can(viewer, 'w1', 'admin')]).toEqual([true, false, false]);
    expect([can(member, 'w1', 'viewer'), can(member, 'w1', 'member'), can(member, 'w1', 'admin')]).toEqual([true, true, false]);
    expect([can(admin, 'w1', 'viewer'), can(admin, 'w1', 'member'), can(admin, 'w1', 'admin')]).toEqual([true, true, true]);
  });

  it('checks the role in the workspace asked about, and nothing outside the workspaces one belongs to', () => {
    expect(can(admin, 'w2', 'member')).toBe(false);
    expect(can(admin, 'w2', 'viewer')).toBe(true);
    expect(can(admin, 'w3', 'viewer')).toBe(false);
    expect(can(admin, null, 'viewer')).toBe(false);
    expect(roleIn(admin, 'w2')).toBe('viewer');
    expect(roleIn(admin, 'w3')).toBeNull();
  });

  it('lets the owner do everything, anywhere, and nobody else what needs the owner', () => {
    const owner = me([], true);
    expect(can(owner, 'anywhere', 'admin')).toBe(true);
    expect(can(owner, null, 'owner')).toBe(true);
    expect(roleIn(owner, 'anywhere')).toBe('admin');
    expect(can(admin, 'w1', 'owner')).toBe(false);
    expect(canSomewhere(admin, 'owner')).toBe(false);
  });

  it('answers for things every workspace shares by the highest role in any workspace', () => {
    expect(canSomewhere(admin, 'admin')).toBe(true);
    expect(canSomewhere(member, 'admin')).toBe(false);
    expect(canSomewhere(member, 'member')).toBe(true);
    expect(canSomewhere(me([]), 'viewer')).toBe(false);
  });
});

describe('sameGrants', () => {
  it('tells a changed role, a new or lost workspace and a new owner apart from the same grants in another order', () => {
    const a = me([
      { workspace_id: 'w1', role: 'viewer' },
      { workspace_id: 'w2', role: 'admin' },
    ]);
    const reordered = me([
      { workspace_id: 'w2', role: 'admin' },
      { workspace_id: 'w1', role: 'viewer' },
    ]);
    expect(sameGrants(a, reordered)).toBe(true);
    expect(sameGrants(a, me([{ workspace_id: 'w1', role: 'member' }, { workspace_id: 'w2', role: 'admin' }]))).toBe(false);
    expect(sameGrants(a, me([{ workspace_id: 'w1', role: 'viewer' }]))).toBe(false);
    expect(sameGrants(a, me(a.roles, true))).toBe(false);
  });
});
