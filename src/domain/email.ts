/**
 * The one rule for the e-mail address of a user, an invitation or a notification: a dot-atom
 * local part, `@`, and a host name of one or more labels. A single label is allowed: the owner
 * created on first start is `admin@localhost` by default, and an address on a private network
 * may have no dot; the common format rule (which requires one) kept that owner from being invited
 * to another workspace.
 */
const EMAIL = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

export const isEmailAddress = (text: string): boolean => text.length <= 254 && EMAIL.test(text);
