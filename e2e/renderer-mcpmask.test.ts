/** The GUI's masking of config/mcp.json's env and header values (src/renderer/src/lib/mcpmask.ts). */
import { describe, expect, it } from 'vitest';
import { maskMcp, unmaskMcp } from '../src/renderer/src/lib/mcpmask.js';
import { KEY_MASK } from '../src/renderer/src/lib/parse.js';

const file = `{
  "mcpServers": {
    "gh": { "command": "npx", "args": ["-y", "gh-mcp"], "env": { "TOKEN": "ghp_secret1", "MODE": "ro" } },
    "web": { "type": "http", "url": "https://x/mcp", "headers": { "Authorization": "Bearer s2" } },
    "two": { "command": "x", "env": { "TOKEN": "ghp_secret3" } }
  }
}
`;

describe('mcp.json masking', () => {
  it('hides every env and header value, keeps the rest of the text as written', () => {
    const shown = maskMcp(file);
    for (const s of ['ghp_secret1', 'ro"', 'Bearer s2', 'ghp_secret3']) expect(shown).not.toContain(s);
    expect(shown).toBe(
      file
        .replace('"TOKEN": "ghp_secret1"', `"TOKEN": "${KEY_MASK}"`)
        .replace('"MODE": "ro"', `"MODE": "${KEY_MASK}"`)
        .replace('"Authorization": "Bearer s2"', `"Authorization": "${KEY_MASK}"`)
        .replace('"TOKEN": "ghp_secret3"', `"TOKEN": "${KEY_MASK}"`),
    );
    expect(maskMcp('{"mcpServers": [')).toBe('{"mcpServers": [');
  });

  it('a save puts back each masked value by server and name; a typed one stands; a mask with nothing behind it is refused', () => {
    const edited = maskMcp(file)
      .replace('"args": ["-y", "gh-mcp"]', '"args": ["-y", "gh-mcp@2"]')
      .replace(`"MODE": "${KEY_MASK}"`, '"MODE": "rw"');
    expect(unmaskMcp(edited, file)).toBe(
      file.replace('gh-mcp"]', 'gh-mcp@2"]').replace('"MODE": "ro"', '"MODE": "rw"'),
    );
    const renamed = maskMcp(file).replace('"two"', '"three"');
    expect(() => unmaskMcp(renamed, file)).toThrow(
      `mcp.json: mcpServers.three.env.TOKEN is hidden (${KEY_MASK}) but had no value to keep`,
    );
  });
});
