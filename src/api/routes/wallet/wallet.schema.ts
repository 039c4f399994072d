import { Type } from 'typebox';
import { authErrors, Envelope, SlugParams } from '../../schemas.js';

const tags = ['Wallet'];

export const getWallet = {
  tags,
  summary: "The workspace wallet's balance (minor units) and currency",
  params: SlugParams,
  response: {
    200: Envelope(
      Type.Object(
        {
          balance: Type.Integer({ description: 'Minor units (cents).' }),
          currency: Type.String(),
          alert_threshold: Type.Integer({ description: 'Notify when the balance falls below (minor units).' }),
        },
        { additionalProperties: false },
      ),
    ),
    ...authErrors,
  },
};

export const setAlertThreshold = {
  tags,
  summary: 'Set the low-balance alert threshold, in minor units (owner/admin)',
  params: SlugParams,
  body: Type.Object({ threshold: Type.Integer({ minimum: 0, maximum: 1_000_000_000_000 }) }, { additionalProperties: false }),
  response: { 200: Envelope(Type.Object({ threshold: Type.Integer() }, { additionalProperties: false })), ...authErrors },
};
