class Account {
  constructor(private readonly id: string, public balance: number = 0) {}
  describe() { return `${this.id}: ${this.balance}` }
}
return [new Account("a-1", 5).describe(), Object.keys(new Account("b"))]
