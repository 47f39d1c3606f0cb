throw { toString() { throw new Error('no') } }
