// Browse Rollouts: one bundle, one page (src/extension/panels/browse_panel.ts). The page is the browse/ folder.
import { mountBrowse } from './browse/app';

mountBrowse();
