import { deploySuite } from './deploy.suite.js';

deploySuite('sqlite');
