/** Where projects are served and reached, for the addresses the API shows (from the configuration). */
export interface ProjectPolicy {
  /** apps get `<project>-<workspace>.<appsDomain>` (`--apps-domain`) */
  appsDomain: string;
  /** the port the router serves apps on, for the URLs shown to users */
  routerPort: number;
  /** `--public-url`: the API's address as GitHub reaches it, for the webhook URLs shown; empty: paths alone */
  publicUrl: string;
}
