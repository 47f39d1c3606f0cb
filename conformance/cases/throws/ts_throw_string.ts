throw 'raw-throw'
