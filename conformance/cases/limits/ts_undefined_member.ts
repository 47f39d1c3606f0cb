return { value: undefined }
