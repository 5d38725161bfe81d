import { describe, expect, it } from 'vitest';
import type { AgentProfileDto } from '../api/types';
import { moveBlocked, moveTargets, reboundText } from './rebind';

const profile = (id: string, name: string) => ({ id, name }) as AgentProfileDto;

describe('moveTargets', () => {
  const profiles = [profile('a', 'Agent A'), profile('b', 'Agent B'), profile('c', 'Agent C')];

  it('offers every profile but the session’s own', () => {
    expect(moveTargets(profiles, 'b').map((p) => p.name)).toEqual(['Agent A', 'Agent C']);
  });

  it('offers every profile to a session whose profile was deleted', () => {
    expect(moveTargets(profiles, null)).toHaveLength(3);
  });
});

describe('moveBlocked', () => {
  it('refuses while the agent runs or starts, or a turn is open', () => {
    expect(moveBlocked('RUNNING', false)).toMatch(/agent is working/);
    expect(moveBlocked('STARTING', false)).toMatch(/agent is working/);
    expect(moveBlocked('WAITING_FOR_INPUT', true)).toMatch(/agent is working/);
  });

  it('lets a waiting, failed or cancelled session move', () => {
    for (const state of ['WAITING_FOR_INPUT', 'CREATED', 'FAILED', 'CANCELLED']) {
      expect(moveBlocked(state, false)).toBeNull();
    }
  });
});

describe('reboundText', () => {
  it('names both profiles of a rebound note', () => {
    expect(reboundText({ reason: 'rebound', from: 'Agent A', to: 'Agent B' })).toBe('Moved from Agent A to Agent B');
  });

  it('is null for other notes and for a rebound note without its names', () => {
    expect(reboundText({ reason: 'stopped' })).toBeNull();
    expect(reboundText({ reason: 'rebound' } as never)).toBeNull();
    expect(reboundText({ note: 'older' })).toBeNull();
  });
});
