// The source side of builds: fetch a repository, get a token to fetch it with, and turn the
// checkout into a build context (the runtime's BuildSpec takes contextDir and dockerfile).
export { GitSource, GitSourceError, type GitSourceOptions, type GitSourceErrorCode, type FetchRequest, type Checkout } from './git-source.js';
export {
  GitHubApp,
  GitHubAppError,
  GITHUB_API_URL,
  type GitHubAppOptions,
  type GitHubAppErrorCode,
  type InstallationToken,
  type AppInfo,
} from './github-app.js';
export {
  prepareBuildContext,
  BuildContextError,
  DEFAULT_BASE_IMAGES,
  GENERATED_DOCKERFILE,
  type BaseImages,
  type BuildContext,
  type BuildContextErrorCode,
  type BuildStrategy,
  type PrepareOptions,
} from './context.js';
