export interface MetaTable {
  key: string;
  value: string;
}

export interface SystemTables {
  meta: MetaTable;
}
