// The Obsidian plugin's settings tab (src/settingsTab.ts) is its settings
// screen, drawn with Obsidian's UI classes and popper.js; the sync never
// runs it. main.ts imports it, so esbuild gives main.ts this class instead.
export class OmnivoreSettingTab {}
