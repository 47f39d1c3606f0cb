try:
    await helpers.fail({})
except HelperCallError as error:
    return {"isTyped": True, "helperName": error.helperName, "message": str(error)}
